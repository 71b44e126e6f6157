//! Connections let go on purpose, over the in-memory peer under tokio's
//! paused clock: `reconnect_every` closes a connection after its requests
//! and opens another with its setup calls; a flow with a session of its
//! own opens one for itself. Exact counts of what the peer saw.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::tests::{no_steering, one_method, plan, run_set_up};
use crate::plan::{CallTemplate, Flow, Mix, Pacing, SetupCall, Step};
use crate::rpc::Version;
use crate::transport::{Peer, Seen};

fn initialize() -> Vec<SetupCall> {
    vec![SetupCall {
        method: "initialize".into(),
        params: None,
        notification: false,
        subscribe: false,
        race: false,
    }]
}

/// Per connection the peer saw (in the order they opened), its calls by method.
fn by_connection(seen: &[Seen]) -> Vec<BTreeMap<String, u64>> {
    let mut each: Vec<BTreeMap<String, u64>> = Vec::new();
    for call in seen {
        if each.len() <= call.connection {
            each.resize(call.connection + 1, BTreeMap::new());
        }
        *each[call.connection].entry(call.method.clone()).or_default() += 1;
    }
    each
}

/// 200 requests over one connection carrying 4 calls at once, a new
/// connection every 10, in the closed model and in the open one (where the
/// pacer hands the requests out, at 100/s): 20 connections, each set up
/// once and carrying exactly 10 of the load's calls.
#[tokio::test(start_paused = true)]
async fn a_connection_is_opened_anew_with_its_setup_after_every_n_requests() {
    for pacing in [Pacing::Closed, Pacing::Open { rate: 100.0 }] {
        let peer = Peer::logging(Duration::from_millis(5));
        let mut plan = plan(pacing, 1, 4);
        plan.requests = Some(200);
        plan.reconnect_every = Some(10);
        let summary = run_set_up(plan, one_method(), initialize(), &peer, no_steering)
            .await
            .expect("the run ended");
        assert_eq!(summary.total.ok, 200, "{pacing:?}: {:?}", summary.total.outcomes);
        assert_eq!(
            peer.counts().connections.load(Ordering::Relaxed),
            20,
            "{pacing:?}"
        );
        let each = by_connection(&peer.counts().seen());
        assert_eq!(each.len(), 20, "{pacing:?}");
        for (i, calls) in each.iter().enumerate() {
            assert_eq!(
                calls.get("initialize"),
                Some(&1),
                "{pacing:?} connection {i}: {calls:?}"
            );
            assert_eq!(
                calls.get("eth_chainId"),
                Some(&10),
                "{pacing:?} connection {i}: {calls:?}"
            );
        }
        let c = &summary.connections;
        assert_eq!(
            (c.opened, c.reopened, c.opened_in_all, c.recycled),
            (1, 19, 20, 20),
            "{pacing:?}"
        );
        let setup = summary.setup.expect("a setup summary");
        assert_eq!(setup.connections_ok, 20, "{pacing:?}");
        assert_eq!(setup.calls.expect("setup calls timed").answered, 20, "{pacing:?}");
    }
}

/// Without `reconnect_every` the one connection carries everything.
#[tokio::test(start_paused = true)]
async fn without_reconnect_every_one_connection_carries_every_request() {
    let peer = Peer::logging(Duration::from_millis(5));
    let mut plan = plan(Pacing::Closed, 1, 4);
    plan.requests = Some(200);
    let summary = run_set_up(plan, one_method(), initialize(), &peer, no_steering)
        .await
        .expect("the run ended");
    assert_eq!(peer.counts().connections.load(Ordering::Relaxed), 1);
    let c = &summary.connections;
    assert_eq!((c.opened_in_all, c.recycled), (1, 0));
}

fn own_session_flow() -> Mix {
    let step = |row: u32, method: &str| Step {
        row,
        template: CallTemplate::new(Version::V2, method, None),
        notification: false,
        expect: None,
        captures: Vec::new(),
        until: None,
        for_each: None,
        always: false,
    };
    let flow = Flow {
        row: 2,
        vars: Vec::new(),
        steps: vec![step(0, "tools/list"), step(1, "tools/call")],
        slots: 0,
        own_connection: true,
    };
    let rows = ["tools/list", "tools/call", "flow:session"]
        .map(String::from)
        .to_vec();
    Mix::with_flows(rows, Vec::new(), vec![(flow, 1)], None)
}

/// 30 flows, each on a session of its own: 30 connections, each set up
/// once and carrying one flow's two steps; the run's own connections are
/// never opened, since nothing goes on them.
#[tokio::test(start_paused = true)]
async fn a_flow_with_a_session_of_its_own_opens_and_closes_one_each() {
    let peer = Peer::logging(Duration::from_millis(5));
    let mut plan = plan(Pacing::Closed, 3, 1);
    plan.requests = Some(30);
    let summary = run_set_up(plan, own_session_flow(), initialize(), &peer, no_steering)
        .await
        .expect("the run ended");
    assert_eq!(summary.methods[2].ok, 30, "{:?}", summary.methods[2].outcomes);
    assert_eq!(peer.counts().connections.load(Ordering::Relaxed), 30);
    for (i, calls) in by_connection(&peer.counts().seen()).iter().enumerate() {
        let expected: BTreeMap<String, u64> = [("initialize", 1), ("tools/call", 1), ("tools/list", 1)]
            .map(|(m, n)| (m.to_string(), n))
            .into();
        assert_eq!(calls, &expected, "connection {i}");
    }
    let c = &summary.connections;
    assert_eq!(
        (c.planned, c.opened, c.reopened, c.opened_in_all, c.recycled),
        (0, 0, 30, 30, 30)
    );
}
