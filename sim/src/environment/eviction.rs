//! The API server's eviction subresource (`CREATE pods/{name}/eviction`): admitted by one operator replica's webhook,
//! then the pod deleted, as a real API server does.

use crate::environment::apiserver::{Reply, ServerEnv};
use crate::environment::objects::PodSum;
use crate::environment::store::Store;
use crate::harness::eviction_replicas::{AdmitAnswer, AdmitRequest, TAG_ADMIT};
use madsim::net::Endpoint;
use rollout_operator::admission::evictions::POD_EVICTION_PATH;
use rollout_operator::cluster::ApiError;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::time::Instant;

/// `timeoutSeconds` of the pod-eviction webhook configuration (`deploy/`), and the operator's
/// `-server-tls.request-timeout` (its handler deadline is 90 % of it).
pub(crate) const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Calls the eviction webhook at `at` (failure policy Fail: no answer within the timeout is an error). A fresh
/// endpoint may get the port of an earlier call that gave up, and with it that call's late answer: an answer is
/// taken only by the call it answers (seed 35 of the first drains batch allowed an eviction on another call's
/// answer, judged before a pod crashed), as over HTTP, where a late response dies with its connection.
pub(crate) async fn call_webhook(
    at: SocketAddr,
    call: u64,
    path: &'static str,
    body: Vec<u8>,
) -> Result<AdmitAnswer, String> {
    let ep = Endpoint::bind("0.0.0.0:0").await.map_err(|e| e.to_string())?;
    ep.send_to_raw(at, TAG_ADMIT, Box::new(AdmitRequest { call, path, body })).await.map_err(|e| e.to_string())?;
    let deadline = Instant::now() + WEBHOOK_TIMEOUT;
    loop {
        match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), ep.recv_from_raw(TAG_ADMIT))
            .await
        {
            Ok(Ok((payload, _))) => match payload.downcast::<AdmitAnswer>() {
                Ok(answer) if answer.call == call => return Ok(*answer),
                Ok(_) => continue,
                Err(_) => return Err("malformed answer".into()),
            },
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("context deadline exceeded".into()),
        }
    }
}

/// What a webhook's answer to `review` says, as the API server reads it: allowed, the status code (403 when it
/// gives none) and message; an error if there was no usable answer (failure policy Fail).
pub(crate) fn admission_verdict(
    review: &serde_json::Value,
    answer: &Result<AdmitAnswer, String>,
) -> Result<(bool, u16, String), String> {
    let answer = answer.as_ref().map_err(String::clone)?;
    let body = answer.body.as_ref().map_err(String::clone)?;
    let response = crate::environment::objects::admission_response(review, body)?;
    let allowed = crate::environment::objects::admitted(&response);
    let code = response.pointer("/status/code").and_then(|c| c.as_u64()).unwrap_or(403) as u16;
    let message = response.pointer("/status/message").and_then(|m| m.as_str()).unwrap_or("").to_string();
    Ok((allowed, code, message))
}

/// The API server's `CREATE pods/{name}/eviction`: the eviction admission by one operator replica (picked at
/// random, as a Service picks an endpoint), then, allowed and not a dry run, the pod's deletion (after the rest of
/// the admission chain, 0-0.5 s). The checker judges each committed eviction, and each dry run's writes.
pub async fn evict(env: &ServerEnv, pod: &str, dry_run: bool, options_dry_run: bool) -> Reply {
    let dry = dry_run || options_dry_run;
    let what = format!("EVICT pod {pod}{}", if dry { " (dry run)" } else { "" });
    // A pod terminating (uid) when the eviction arrives; it stays so while that uid exists.
    let terminating_uid = |st: &Store| {
        st.pods.get(pod).filter(|p| p.metadata.deletion_timestamp.is_some()).and_then(|p| p.metadata.uid.clone())
    };
    // The group whose budget covers the pod as the eviction arrives (by its labels, as the budget selects pods):
    // the pod may be gone by the answer (a scale-down removed it).
    let (arrival_rv, n, terminating, group) = {
        let mut st = env.store.lock().unwrap();
        let Some(group) = st.pods.get(pod).map(crate::environment::objects::budget_group_of) else {
            st.trace("drain", format!("{what} -> not_found"));
            return Reply::Done(Err(ApiError::NotFound(format!("pods \"{pod}\" not found"))));
        };
        st.oracle.checker.drains.asked += 1;
        let terminating = terminating_uid(&st);
        st.oracle.checker.drains.of_terminating += u64::from(terminating.is_some());
        (st.rv, st.oracle.checker.drains.asked, terminating, group)
    };
    if env.eviction_webhooks.is_empty() {
        return Reply::Done(Err(ApiError::Unavailable("no eviction webhook configured".into())));
    }
    // The Service's endpoints: every replica, or in the certificate world those serving a certificate, each call
    // checked against the configuration's CA bundle before it is sent (failure policy Fail: a refusal fails it).
    let (replica, refused) = match &env.eviction_certificates {
        None => (env.rng.lock().unwrap().range(0..env.eviction_webhooks.len() as u64) as usize, None),
        Some(served) => served.route(&env.store, |n| env.rng.lock().unwrap().range(0..n)),
    };
    if let Some(e) = refused {
        let mut st = env.store.lock().unwrap();
        st.oracle.checker.drains.failed += 1;
        st.trace("drain", format!("{what} via operator-{replica} -> webhook not called: {e}"));
        let message = format!("Internal error occurred: {e}");
        return Reply::Done(Err(ApiError::Rejected { code: 500, message }));
    }
    let mut eviction = serde_json::json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": crate::environment::objects::NAMESPACE}});
    if options_dry_run {
        eviction["deleteOptions"] = serde_json::json!({"dryRun": ["All"]});
    }
    let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("eviction-{n}"),
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "name": pod, "namespace": crate::environment::objects::NAMESPACE, "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:node-drainer"},
        "dryRun": dry_run,
        "object": eviction}});
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let answer = call_webhook(env.eviction_webhooks[replica], n, POD_EVICTION_PATH, body).await;
    let (allowed, code, message) = match admission_verdict(&review, &answer) {
        Ok(v) => v,
        Err(e) => {
            let mut st = env.store.lock().unwrap();
            st.oracle.checker.drains.failed += 1;
            st.trace("drain", format!("{what} via operator-{replica} -> webhook failed: {e}"));
            let message = format!(
                "Internal error occurred: failed calling webhook \"pod-eviction-rollout-operator.grafana.com\": {e}"
            );
            return Reply::Done(Err(ApiError::Rejected { code: 500, message }));
        }
    };
    let writes = answer.as_ref().map_or(0, |a| a.writes);
    if dry && writes > 0 {
        let mut st = env.store.lock().unwrap();
        let at = st.elapsed();
        st.oracle.checker.record_dry_run_write(at, format!("{what} made {writes} writes (allowed: {allowed})"));
    }
    if !allowed {
        let mut st = env.store.lock().unwrap();
        let at = st.elapsed();
        st.oracle.checker.judge_eviction_denial(at, group.as_deref().unwrap_or_default(), pod, code, &message);
        let what = format!("the eviction of {pod} ({code})");
        crate::actors::no_downscale::judge_denial_scope_of(
            &mut st,
            group.clone(),
            &message,
            crate::oracle::checker::ZPDB_SCOPE,
            &what,
        );
        let intent = format!("grafana.com/eviction-intent.eviction-{n}");
        let carries = |annotations: &Option<std::collections::BTreeMap<String, String>>| {
            annotations.as_ref().is_some_and(|a| a.contains_key(&intent))
        };
        let present = st.pods.values().any(|p| carries(&p.metadata.annotations))
            || st.statefulsets.values().any(|s| carries(&s.metadata.annotations));
        st.oracle.checker.record_denied_decision(&format!("eviction-{n}"), code, present);
        if message.contains("max unavailable = 0") {
            let denial_rv = st.rv;
            st.oracle.checker.judge_zero_budget_denial(at, arrival_rv, denial_rv, pod, &message);
        }
        if code == 429 && terminating.is_some() && terminating == terminating_uid(&st) {
            st.oracle.checker.judge_terminating_denial(at, pod, &message);
        }
        st.oracle.checker.drains.denied += 1;
        st.trace("drain", format!("{what} via operator-{replica} -> denied ({code}): {message}"));
        let denial = crate::oracle::activity::EvictionDenial { pod: pod.to_string(), code, message: message.clone() };
        st.oracle.activity.eviction_denials.push(denial);
        return Reply::Done(Err(ApiError::Rejected { code, message }));
    }
    if dry {
        let mut st = env.store.lock().unwrap();
        st.oracle.checker.drains.dry_runs_allowed += 1;
        st.trace("drain", format!("{what} via operator-{replica} -> allowed"));
        return Reply::Done(Ok(()));
    }
    // The rest of the admission chain and the eviction handler's own reads.
    let chain = env.rng.lock().unwrap().millis(0, 500);
    tokio::time::sleep(chain).await;
    let mut st = env.store.lock().unwrap();
    let Some(mut p) = st.pods.get(pod).cloned() else {
        st.trace("drain", format!("{what} via operator-{replica} -> allowed, but the pod is gone"));
        return Reply::Done(Err(ApiError::NotFound(format!("pods \"{pod}\" not found"))));
    };
    if p.metadata.deletion_timestamp.is_some() {
        st.trace("drain", format!("{what} via operator-{replica} -> allowed (already terminating)"));
        return Reply::Done(Ok(()));
    }
    let at = st.elapsed();
    let before = st.rv;
    let disruptor = format!("eviction by the drain, admitted by operator-{replica}");
    st.oracle.checker.judge_disruption(at, arrival_rv, before, &PodSum::of(&p), &disruptor);
    st.oracle.checker.drains.committed += 1;
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
    st.put_pod(p);
    st.trace("drain", format!("{what} via operator-{replica} -> evicted ({message})"));
    Reply::Done(Ok(()))
}
