//! Test support for the controller's integration tests, by role: Kubernetes objects as a cluster would hold them
//! ([`objects`]), an in-memory API server implementing the cluster port (watches, preconditions, resourceVersions),
//! with knobs for holding back watch events and injecting failures ([`cluster`]), and the reconciler tests' harness:
//! a controller over that server whose cache sees watch events only when a test pumps them ([`harness`]).

#![allow(dead_code)]

pub mod cluster;
pub mod harness;
pub mod objects;

// The names the tests use; each test binary uses its own share of them.
#[allow(unused_imports)]
pub use cluster::{Call, FakeCluster};
#[allow(unused_imports)]
pub use harness::{Harness, WatchFeed};
#[allow(unused_imports)]
pub use objects::{pod, sts, three_zones};
