//! The defences in depth, as switches the harness can turn off one at a time.
//!
//! Several mechanisms back each other up: a stale cache is kept from deleting the wrong pod both by the uid
//! precondition on deletions and by the expectations of the controller's own writes; a downscale being prepared is
//! kept apart from a rollout step both by the pass failing closed on an unreadable record and by the rollout-step
//! claim; a claim's date is late enough both because it is dated at its deadline and because it is dated again once
//! the commit is known. Tested only together, a regression in one layer is hidden by the other. Each layer is
//! therefore a named switch, so the model and the simulation can run with a layer alone and show that it holds
//! there, and that with its partner gone too the checkers find the violation.
//!
//! Owns the list of layers and which are on. Production runs with every layer ([`Defences::ALL`], the default):
//! a build without the `defence-switches` feature (the operator's) cannot construct anything else. The code that
//! carries each layer asks [`Defences::has`]; it must not be asked for anything but that.

/// One defence in depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    /// Pod deletions carry the uid the plan was made on (the reconcile loop).
    UidPreconditions,
    /// The pass waits for the cache to show the controller's own writes ([`crate::pass::plan_pass`]).
    Expectations,
    /// The prepare-downscale webhook reads the group again once its in-progress marker is in the record
    /// ([`crate::admission::prepare_flow`]).
    RereadAfterClaim,
    /// A downscale's claim in the record is dated with the latest time its replica change can commit, not with the
    /// time of the claim (the zone tracker's claims).
    ClaimDatedAtDeadline,
    /// Once a claimed downscale is known to have committed, its entry is dated again at that moment (the record
    /// store's end of a claim).
    RedatedAtCommit,
    /// A pass of a group the prepare-downscale webhook serves does nothing when the record cannot be read
    /// ([`crate::pass::plan_pass`]).
    RecordFailsClosed,
    /// A pass that deletes pods of such a group claims its rollout step in the record first, conditional on the
    /// version it read ([`crate::pass::plan_pass`]).
    RolloutStepClaims,
}

impl Layer {
    pub const ALL: [Layer; 7] = [
        Layer::UidPreconditions,
        Layer::Expectations,
        Layer::RereadAfterClaim,
        Layer::ClaimDatedAtDeadline,
        Layer::RedatedAtCommit,
        Layer::RecordFailsClosed,
        Layer::RolloutStepClaims,
    ];

    /// The layer's name on command lines and in test names.
    pub fn name(self) -> &'static str {
        match self {
            Layer::UidPreconditions => "uid-preconditions",
            Layer::Expectations => "expectations",
            Layer::RereadAfterClaim => "reread-after-claim",
            Layer::ClaimDatedAtDeadline => "claim-dated-at-deadline",
            Layer::RedatedAtCommit => "redated-at-commit",
            Layer::RecordFailsClosed => "record-fails-closed",
            Layer::RolloutStepClaims => "rollout-step-claims",
        }
    }

    pub fn parse(name: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| l.name() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Which defences are on. Production: all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Defences {
    /// Layers switched off, as bits of [`Layer::bit`].
    off: u8,
}

impl Default for Defences {
    fn default() -> Self {
        Defences::ALL
    }
}

impl Defences {
    /// Every layer on: the only value production code can make.
    pub const ALL: Defences = Defences { off: 0 };

    pub fn has(&self, layer: Layer) -> bool {
        self.off & layer.bit() == 0
    }

    /// Whether every layer is on.
    pub fn all_on(&self) -> bool {
        self.off == 0
    }

    /// The layers switched off, for reports.
    pub fn off(&self) -> Vec<Layer> {
        Layer::ALL.into_iter().filter(|l| !self.has(*l)).collect()
    }
}

/// A `--defences` value that selects no set of layers.
#[cfg(feature = "defence-switches")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefencesError {
    /// Neither `all` nor a `-` list.
    #[error("{0:?}: `all`, or `-` and the layers to switch off, comma-separated")]
    Syntax(String),
    #[error("unknown defence {0:?}; one of: {names}", names = layer_names())]
    UnknownLayer(String),
}

#[cfg(feature = "defence-switches")]
fn layer_names() -> String {
    Layer::ALL.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ")
}

#[cfg(feature = "defence-switches")]
impl Defences {
    /// These defences with `layers` switched off (test-only).
    pub fn without(self, layers: &[Layer]) -> Defences {
        Defences { off: layers.iter().fold(self.off, |off, l| off | l.bit()) }
    }

    /// `--defences` syntax: `all`, or `-` and a comma-separated list of layers to switch off
    /// (`-uid-preconditions,expectations`).
    pub fn parse(s: &str) -> Result<Defences, DefencesError> {
        if s == "all" {
            return Ok(Defences::ALL);
        }
        let Some(list) = s.strip_prefix('-') else {
            return Err(DefencesError::Syntax(s.to_string()));
        };
        let mut layers = Vec::new();
        for name in list.split(',').map(str::trim) {
            let layer = Layer::parse(name).ok_or_else(|| DefencesError::UnknownLayer(name.to_string()))?;
            layers.push(layer);
        }
        Ok(Defences::ALL.without(&layers))
    }

    /// The `--defences` value that selects these defences again.
    pub fn flag(&self) -> String {
        if self.all_on() {
            return "all".to_string();
        }
        let names: Vec<&str> = self.off().into_iter().map(Layer::name).collect();
        format!("-{}", names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_has_every_layer() {
        let d = Defences::default();
        assert!(Layer::ALL.iter().all(|l| d.has(*l)));
        assert!(d.all_on());
        assert!(d.off().is_empty());
    }

    #[test]
    fn layers_are_switched_off_one_by_one_and_named_back() {
        let d = Defences::ALL.without(&[Layer::UidPreconditions, Layer::RolloutStepClaims]);
        assert!(!d.has(Layer::UidPreconditions));
        assert!(!d.has(Layer::RolloutStepClaims));
        assert!(d.has(Layer::Expectations));
        assert_eq!(d.off(), vec![Layer::UidPreconditions, Layer::RolloutStepClaims]);
        assert_eq!(d.flag(), "-uid-preconditions,rollout-step-claims");
        assert_eq!(Defences::parse(&d.flag()), Ok(d));
        assert_eq!(Defences::parse("all"), Ok(Defences::ALL));
        for layer in Layer::ALL {
            assert_eq!(Layer::parse(layer.name()), Some(layer));
        }
    }

    #[test]
    fn bad_switches_are_refused_with_the_names() {
        let err = Defences::parse("-uid").unwrap_err();
        assert_eq!(err, DefencesError::UnknownLayer("uid".to_string()));
        let text = err.to_string();
        assert!(text.contains("unknown defence \"uid\"") && text.contains("uid-preconditions"), "{text}");
        assert_eq!(Defences::parse("uid-preconditions"), Err(DefencesError::Syntax("uid-preconditions".to_string())));
    }
}
