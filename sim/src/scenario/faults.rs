//! The fault kinds a world may inject, and how `--faults` names them.

use serde::{Deserialize, Serialize};
/// Which faults a run may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultMix {
    pub partitions: bool,
    pub message_loss: bool,
    pub latency_spikes: bool,
    pub watch_delay_spikes: bool,
    pub apiserver_restarts: bool,
    pub controller_crashes: bool,
    pub crash_after_delete: bool,
    pub watch_expiry: bool,
    pub pod_crashes: bool,
    pub never_ready: bool,
    pub quota: bool,
    pub pauses: bool,
}

impl FaultMix {
    pub const ALL: FaultMix = FaultMix {
        partitions: true,
        message_loss: true,
        latency_spikes: true,
        watch_delay_spikes: true,
        apiserver_restarts: true,
        controller_crashes: true,
        crash_after_delete: true,
        watch_expiry: true,
        pod_crashes: true,
        never_ready: true,
        quota: true,
        pauses: true,
    };
    pub const NONE: FaultMix = FaultMix {
        partitions: false,
        message_loss: false,
        latency_spikes: false,
        watch_delay_spikes: false,
        apiserver_restarts: false,
        controller_crashes: false,
        crash_after_delete: false,
        watch_expiry: false,
        pod_crashes: false,
        never_ready: false,
        quota: false,
        pauses: false,
    };
}

impl FaultMix {
    /// `all`, `none`, or a comma-separated list of fault kinds (names as in `--help`).
    pub fn parse(s: &str) -> Result<FaultMix, String> {
        match s {
            "all" => return Ok(FaultMix::ALL),
            "none" => return Ok(FaultMix::NONE),
            _ => {}
        }
        let mut f = FaultMix::NONE;
        for name in s.split(',').map(str::trim) {
            let flag = match name {
                "partitions" => &mut f.partitions,
                "loss" => &mut f.message_loss,
                "latency" => &mut f.latency_spikes,
                "watch-delay" => &mut f.watch_delay_spikes,
                "apiserver-restarts" => &mut f.apiserver_restarts,
                "controller-crashes" => &mut f.controller_crashes,
                "crash-after-delete" => &mut f.crash_after_delete,
                "watch-expiry" => &mut f.watch_expiry,
                "pod-crashes" => &mut f.pod_crashes,
                "never-ready" => &mut f.never_ready,
                "quota" => &mut f.quota,
                "pauses" => &mut f.pauses,
                other => return Err(format!("unknown fault kind {other:?}")),
            };
            *flag = true;
        }
        Ok(f)
    }
}
