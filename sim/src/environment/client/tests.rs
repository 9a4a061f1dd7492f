use super::*;
use crate::environment::apiserver;
use k8s_openapi::api::core::v1::ConfigMap;
use madsim::runtime::{Handle, Runtime};
use rollout_operator::cluster::ZoneTrackerStore;

fn record(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    cm.metadata.resource_version = Some("7".to_string());
    cm
}

#[test]
fn a_commit_is_known_from_the_first_event_at_or_after_it_on_its_own_stream() {
    let t0 = tokio::time::Instant::now();
    let ms = Duration::from_millis;
    let c = ProcessLog::default();
    c.consumed(Kind::Pods, 10, t0);
    c.consumed(Kind::StatefulSets, 12, t0 + ms(1));
    c.consumed(Kind::Pods, 14, t0 + ms(2));
    assert_eq!(c.consumed_at(Kind::Pods, 10), Some(t0));
    assert_eq!(c.consumed_at(Kind::Pods, 12), Some(t0 + ms(2)), "12 is not a pod commit: 14 tells of it");
    assert_eq!(c.consumed_at(Kind::StatefulSets, 12), Some(t0 + ms(1)));
    assert_eq!(c.consumed_at(Kind::Pods, 15), None, "not consumed yet");
    assert_eq!(c.consumed_at(Kind::Pods, 9), None, "before what is remembered");
    for rv in 100..100 + ProcessLog::KEPT as u64 {
        c.consumed(Kind::Pods, rv, t0 + ms(3));
    }
    assert_eq!(c.consumed_at(Kind::Pods, 14), None, "forgotten");
}

/// Seed 31's shape, alone: a process killed with a read of the record in flight, and the process that replaces
/// it at the same address and sends its write with the same first tag. The server answers the dead process's
/// read only once the write has arrived, and the write's own reply is lost: the new process must time out, not
/// take the read's reply for its write's success.
#[test]
fn a_late_reply_to_a_dead_process_is_not_taken_by_the_next_one_at_its_address() {
    let rt = Runtime::with_seed_and_config(1, madsim::Config::default());
    rt.block_on(async {
        let handle = Handle::current();
        let server = handle.create_node().name("apiserver").ip(apiserver::address().ip()).build();
        let node = handle.create_node().name("controller").ip([10, 0, 0, 3].into()).build();
        server.spawn(async {
            let ep = Endpoint::bind(apiserver::address()).await.unwrap();
            let (read, reader) = ep.recv_from_raw(apiserver::TAG_API).await.unwrap();
            let read = read.downcast::<Request>().ok().unwrap();
            assert!(matches!(read.op, Op::GetConfigMap { .. }));
            let (write, _) = ep.recv_from_raw(apiserver::TAG_API).await.unwrap();
            let write = write.downcast::<Request>().ok().unwrap();
            assert!(matches!(write.op, Op::ReplaceConfigMap { .. }));
            assert_eq!(write.reply_tag, read.reply_tag, "the test needs both requests to carry the same tag");
            let reply = Reply::ConfigMap(Ok(Some(Box::new(record("record")))));
            let answer = Answer { client: read.knowledge.incarnation, reply };
            ep.send_to_raw(reader, read.reply_tag, Box::new(answer)).await.unwrap();
            std::future::pending::<()>().await
        });
        let (dead_at, next_at, written) = node
            .spawn(async {
                let dead = SimCluster::connect(1).await.unwrap();
                let dead_at = dead.local_addr().unwrap();
                let in_flight = tokio::spawn(async move { dead.get_config_map("record").await });
                tokio::time::sleep(Duration::from_millis(200)).await;
                // Killed: the task and its endpoint are gone.
                in_flight.abort();
                let _ = in_flight.await;
                let next = SimCluster::connect(2).await.unwrap();
                let next_at = next.local_addr().unwrap();
                let written = next.replace_config_map(&record("record")).await;
                (dead_at, next_at, written)
            })
            .await
            .unwrap();
        assert_eq!(dead_at, next_at, "the test needs the new process at the dead one's address");
        assert!(
            matches!(&written, Err(ApiError::Unavailable(why)) if why.contains("timed out")),
            "the write got no reply of its own, yet: {written:?}"
        );
    });
}
