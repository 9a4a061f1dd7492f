//! Watches: events reach a watcher after a configurable delay, in order; a watch that resumes from a compacted (or
//! unluckily old) resourceVersion is told "too old resource version" and the client relists.

use crate::Kind;
use crate::environment::apiserver::rbac::webhook_resource;
use crate::environment::apiserver::{ServerEnv, WatchMsg, WatchRequest};
use crate::environment::store::LogEntry;
use rollout_operator::cluster::{ApiError, WebhookKind};
use rollout_operator::kube::rbac::Access;
use std::time::Duration;
use tokio::time::Instant;

pub(crate) async fn serve_watch(env: ServerEnv, tx: madsim::net::Sender, mut rx: madsim::net::Receiver) {
    let Ok(first) = rx.recv().await else { return };
    let Ok(req) = first.downcast::<WatchRequest>() else { return };
    if let Some(grants) = &env.grants {
        let (group, resource) = match req.kind {
            Kind::Pods => ("", "pods"),
            Kind::StatefulSets => ("apps", "statefulsets"),
            Kind::Budgets => ("rollout-operator.grafana.com", "zoneawarepoddisruptionbudgets"),
            Kind::ValidatingWebhooks => ("admissionregistration.k8s.io", webhook_resource(WebhookKind::Validating)),
            Kind::MutatingWebhooks => ("admissionregistration.k8s.io", webhook_resource(WebhookKind::Mutating)),
        };
        for verb in ["list", "watch"] {
            let access =
                Access { group: group.into(), resource: resource.into(), verb: verb.into(), resource_name: None };
            let cluster_scoped = matches!(req.kind, Kind::ValidatingWebhooks | Kind::MutatingWebhooks);
            if !grants.allows(&access, cluster_scoped) {
                {
                    let mut store = env.store.lock().unwrap();
                    let who = if cluster_scoped { "webhook" } else { "controller" };
                    store.trace(who, format!("{access} -> forbidden (403)"));
                    store.oracle.forbidden.push(format!("{who}: {access}"));
                }
                // The budget and webhook configuration watches' clients are told (the operator then says which
                // grant is missing); the controller's own watches just end.
                if req.kind != Kind::Pods && req.kind != Kind::StatefulSets {
                    let message = format!("forbidden: cannot {access}");
                    let _ = tx.send(Box::new(WatchMsg::Refused(ApiError::Forbidden(message)))).await;
                }
                return;
            }
        }
    }
    let (lifetime, gone_chance) = {
        let k = env.knobs.lock().unwrap();
        (k.watch_lifetime_s, k.gone_chance)
    };
    let deadline = Instant::now() + env.sample_ms((lifetime.0 * 1000, lifetime.1 * 1000));
    let changes = env.store.lock().unwrap().subscribe();
    let cut = || req.kind == Kind::Budgets && env.store.lock().unwrap().budget_watches_down;
    if cut() {
        return;
    }
    let mut cursor = match req.resume {
        Some(rv) => {
            let too_old = {
                let store = env.store.lock().unwrap();
                rv < store.compacted_to || (req.kind == Kind::Budgets && rv < store.budget_resume_floor)
            } || env.rng.lock().unwrap().chance(gone_chance);
            if too_old {
                let _ = tx.send(Box::new(WatchMsg::Gone)).await;
                return;
            }
            rv
        }
        None => {
            let (rv, items) = {
                let store = env.store.lock().unwrap();
                (store.rv, store.list(req.kind))
            };
            if tx.send(Box::new(WatchMsg::List { rv, items })).await.is_err() {
                return;
            }
            rv
        }
    };
    // Events leave in order: each no earlier than the previous one.
    let mut not_before = Instant::now();
    let mut last_sent = Instant::now();
    loop {
        let seen = changes.version();
        let batch: Result<Vec<LogEntry>, ()> = {
            let store = env.store.lock().unwrap();
            if cursor < store.compacted_to {
                Err(())
            } else {
                let from = store.log.partition_point(|e| e.rv <= cursor);
                Ok(store.log.range(from..).cloned().collect())
            }
        };
        let Ok(batch) = batch else {
            let _ = tx.send(Box::new(WatchMsg::Gone)).await;
            return;
        };
        let newest = batch.last().map(|e| e.rv);
        for entry in batch.into_iter().filter(|e| e.kind() == req.kind) {
            let delay = {
                let range = env.knobs.lock().unwrap().event_delay_ms;
                env.sample_ms(range)
            };
            not_before = not_before.max(entry.at + delay);
            tokio::time::sleep_until(not_before).await;
            if Instant::now() >= deadline || cut() {
                return;
            }
            let msg = WatchMsg::Event { rv: entry.rv, deleted: entry.deleted, obj: entry.obj };
            if tx.send(Box::new(msg)).await.is_err() {
                return;
            }
            last_sent = Instant::now();
        }
        if let Some(rv) = newest {
            cursor = rv;
        }
        if Instant::now() >= deadline || cut() {
            return;
        }
        let bookmark_at = last_sent + Duration::from_secs(10);
        tokio::select! {
            biased;
            _ = changes.changed_since(seen) => {}
            _ = tokio::time::sleep_until(bookmark_at) => {
                if tx.send(Box::new(WatchMsg::Bookmark { rv: cursor })).await.is_err() {
                    return;
                }
                last_sent = Instant::now();
            }
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}
