//! `volley validate`: checks a scenario without sending anything, and shows
//! the resolved plan and sample requests exactly as they would be sent.

use std::fmt::Write;

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::plan::{LoadPlan, Mix, Next, Pacing, Planned, Poll, RequestBuilder, SetupCall};
use crate::scenario::{Compiled, Scenario};
use crate::tls::TlsOptions;

/// Sample requests shown.
pub const SAMPLES: usize = 5;

/// The plan of `scenario` as text, ending with `SAMPLES` sample requests.
pub fn describe(scenario: &Scenario, file: &str) -> String {
    let Compiled {
        plan,
        mix,
        setup,
        polls,
        warnings,
    } = scenario.compile();
    let mut out = String::new();
    let _ = writeln!(out, "{file}: valid");
    let _ = writeln!(out, "scenario:    {}", scenario.name);
    if let Some(description) = &scenario.description {
        let _ = writeln!(out, "             {description}");
    }
    let _ = writeln!(
        out,
        "target:      {} ({})",
        scenario.target,
        crate::transport::describe(&scenario.target.to_string(), scenario.http2, scenario.pipeline)
    );
    for (i, target) in scenario.targets.iter().enumerate() {
        let role = if i == 0 {
            "first: the others' ratios are to it"
        } else {
            "compared"
        };
        let _ = writeln!(
            out,
            "  target {}: {} = {} ({role})",
            i + 1,
            target.name,
            target.spec
        );
    }
    if let Some(equality) = scenario.equality.as_ref().filter(|_| scenario.targets.len() > 1) {
        let _ = writeln!(
            out,
            "answers:     compared on a {}% sample{}, {}",
            equality.sample * 100.0,
            if equality.pin_block {
                ", \"latest\" pinned to the first target's head"
            } else {
                ""
            },
            rules_said(equality)
        );
    }
    if scenario.version == crate::rpc::Version::V1 {
        let _ = writeln!(out, "protocol:    JSON-RPC 1.0");
    }
    write_tls(&mut out, &scenario.tls);
    write_headers(&mut out, scenario);
    write_load(&mut out, &plan, !scenario.flows.is_empty());
    write_stages(&mut out, &plan);

    write_mix(&mut out, scenario);
    write_extras(&mut out, scenario, &setup, &polls, &warnings);

    write_samples(&mut out, scenario, &plan, &mix, &polls);
    out
}

/// The file's `[equality]` rules and ignore sets, in words.
fn rules_said(equality: &crate::scenario::Equality) -> String {
    let sets: Vec<&str> = equality.ignore_sets.iter().map(|s| s.name).collect();
    match sets.is_empty() {
        true => format!("{} rule(s)", equality.rules.len()),
        false => format!(
            "{} rule(s), ignore sets: {}",
            equality.rules.len(),
            sets.join(", ")
        ),
    }
}

/// A replay's rules, those of ignore sets told apart (one set is many).
fn replay_rules_said(rules: &[crate::scenario::EqualityRule]) -> String {
    let from_sets = (rules.iter())
        .filter(|r| r.kind == crate::scenario::RuleKind::IgnoreValue)
        .count();
    let own = rules.len() - from_sets;
    match from_sets {
        0 => format!("{own} [equality] rule(s)"),
        n => format!("{own} [equality] rule(s) and {n} pointers of its ignore sets"),
    }
}

fn write_tls(out: &mut String, tls: &TlsOptions) {
    if tls.insecure {
        let _ = writeln!(out, "tls:         INSECURE: certificates not verified");
    } else if tls.cacert.is_some() || tls.system_roots || tls.cert.is_some() {
        let roots = match (&tls.cacert, tls.system_roots) {
            (Some(ca), true) => format!("CA {} and the system store", ca.display()),
            (Some(ca), false) => format!("CA {}", ca.display()),
            (None, _) => "web roots and the system store".to_string(),
        };
        let client = tls
            .cert
            .as_ref()
            .map_or(String::new(), |c| format!("; client certificate {}", c.display()));
        let _ = writeln!(out, "tls:         trusts {roots}{client}");
    }
}

/// The model, the stop condition, the connections, warmup and timeout.
fn write_load(out: &mut String, plan: &LoadPlan, flows: bool) {
    let model = match plan.pacing {
        Pacing::Open { rate } if plan.recorded.is_some() => {
            format!("open model at the recorded pace (a mean of {rate:.1} requests/s)")
        }
        Pacing::Open { rate } => format!("open model, {rate} requests/s"),
        Pacing::Closed => format!("closed model, {} calls in flight", plan.initial_concurrency),
    };
    let stop = match (plan.duration, plan.requests) {
        (Some(d), Some(n)) => format!(
            "{} or {n} requests, whichever comes first",
            humantime::format_duration(d)
        ),
        (Some(d), None) => humantime::format_duration(d).to_string(),
        (None, Some(n)) => format!("{n} requests"),
        (None, None) => "until stopped".into(),
    };
    // A flow is one arrival: what the load counts is calls or flows.
    let (model, stop) = match flows {
        true => (
            model
                .replace("requests/s", "arrivals/s")
                .replace("calls in flight", "calls or flows in flight"),
            stop.replace("requests", "arrivals (a call or a flow each)"),
        ),
        false => (model, stop),
    };
    let _ = writeln!(
        out,
        "load:        {model}, {}{}, {stop}",
        crate::report::count(plan.connections as u64, "connection"),
        if plan.per_connection > 1 {
            format!(" ({} calls in flight each at most)", plan.per_connection)
        } else {
            String::new()
        }
    );
    if !plan.warmup.is_zero() {
        let _ = writeln!(
            out,
            "warmup:      {} (not in the figures)",
            humantime::format_duration(plan.warmup)
        );
    }
    let _ = writeln!(out, "timeout:     {}", humantime::format_duration(plan.timeout));
    if let Some(every) = plan.reconnect_every {
        let _ = writeln!(
            out,
            "reconnect:   each connection closed after {} and opened anew, its setup calls again",
            crate::report::count(every, "request")
        );
    }
}

/// The headers' names (values never shown), which are made per request,
/// and the JWT's secret file.
fn write_headers(out: &mut String, scenario: &Scenario) {
    let fixed = scenario.headers.iter().map(|(n, _)| n.clone());
    let made = (scenario.made_headers.iter()).map(|(n, _)| format!("{n} (made per request)"));
    let names: Vec<String> = fixed.chain(made).collect();
    if !names.is_empty() {
        let _ = writeln!(out, "headers:     {} (values not shown)", names.join(", "));
    }
    if let Some(jwt) = &scenario.jwt_secret {
        let _ = writeln!(
            out,
            "jwt:         Authorization: Bearer <HS256 token, iat = now, a new one each second>, signed with the secret in {} (not shown)",
            jwt.path.display()
        );
    }
}

fn write_stages(out: &mut String, plan: &LoadPlan) {
    if !plan.stages.is_empty() {
        let unit = if plan.is_open() {
            "requests/s"
        } else {
            "calls in flight"
        };
        let start = match plan.pacing {
            Pacing::Open { rate } => rate,
            Pacing::Closed => plan.initial_concurrency as f64,
        };
        let _ = writeln!(out, "stages:");
        let mut previous = start;
        for (i, ((from, to), stage)) in plan.stage_bounds().iter().zip(&plan.stages).enumerate() {
            let _ = writeln!(
                out,
                "  {}. {from:>6.1}s – {to:>6.1}s  {previous} → {} {unit}",
                i + 1,
                stage.target
            );
            previous = stage.target;
        }
    }
}

/// What is sent: the replay file, or the calls with their shares.
fn write_mix(out: &mut String, scenario: &Scenario) {
    if let Some(replay) = &scenario.replay {
        let _ = writeln!(
            out,
            "replay:      {} ({} requests, {} at the end)",
            replay.file.display(),
            replay.requests.len(),
            if replay.looping { "loop" } else { "stop" }
        );
        if replay.times.is_some() {
            let _ = writeln!(
                out,
                "pace:        each request at its recorded time (over `speed`)"
            );
        }
        if let Some(answers) = &replay.answers {
            let _ = writeln!(
                out,
                "expect:      every answer against the recorded one ({} of {} requests have one), {}",
                answers.iter().filter(|a| a.is_some()).count(),
                answers.len(),
                replay_rules_said(&replay.rules)
            );
        }
    } else {
        let flows: u32 = scenario.flows.iter().map(|f| f.weight).sum();
        let total: u32 = scenario.calls.iter().map(|c| c.weight).sum::<u32>() + flows;
        let _ = writeln!(out, "mix:");
        for call in &scenario.calls {
            let mut line = format!(
                "  {:>5.1}%  {}",
                call.weight as f64 * 100.0 / total as f64,
                call.method
            );
            if let Some(name) = &call.name {
                let _ = write!(line, "  (row `{name}`)");
            }
            if let Some(size) = &call.batch {
                let _ = write!(line, "  (batches of {size})");
            }
            if call.notification {
                line.push_str("  (notification)");
            }
            if let Some(expect) = &call.expect {
                let _ = write!(line, "  expects {expect}");
            }
            let _ = writeln!(out, "{line}");
        }
        for flow in &scenario.flows {
            write_flow(out, flow, flow.weight as f64 * 100.0 / total as f64);
        }
        if let Some(batch) = &scenario.batch {
            let _ = writeln!(
                out,
                "batches:     every request a batch of {} drawn from the mix, {:.0}% notifications",
                batch.size,
                batch.notifications * 100.0
            );
        }
    }
}

/// A flow: its share, its `vars`, and each step with what it reads,
/// captures and waits for.
fn write_flow(out: &mut String, flow: &crate::scenario::FlowSpec, share: f64) {
    let _ = writeln!(
        out,
        "  {share:>5.1}%  flow `{}` (row `{}`){}, each step once the one before is answered:",
        flow.name,
        flow.row(),
        match flow.own_connection {
            true => ", on a connection of its own (opened with the setup calls, closed at its end)",
            false => "",
        }
    );
    for (slot, _, text) in &flow.vars {
        let _ = writeln!(
            out,
            "            vars: {} = {text}, made once per flow",
            flow.slots[*slot]
        );
    }
    for (i, step) in flow.steps.iter().enumerate() {
        let mut line = format!("           {}. {}", i + 1, step.method);
        if let Some(params) = &step.params {
            let _ = write!(line, " {params}");
        }
        if let Some(name) = &step.name {
            let _ = write!(line, "  (row `{name}`)");
        }
        if step.notification {
            line.push_str("  (notification)");
        }
        if step.always {
            line.push_str("  (always, even after a failed step)");
        }
        if !step.uses.is_empty() {
            let _ = write!(line, "  uses {}", step.uses.join(", "));
        }
        if let Some(each) = &step.for_each {
            let _ = write!(
                line,
                "  once per value of {} (at most {})",
                flow.slots[each.slot], each.limit
            );
        }
        if let Some(until) = &step.until {
            let _ = write!(
                line,
                "  until {}, tried every {} for at most {}",
                until.check.expect,
                humantime::format_duration(until.every),
                humantime::format_duration(until.within)
            );
        }
        if let Some(expect) = &step.expect {
            let _ = write!(line, "  expects {}", expect.expect);
        }
        for capture in &step.captures {
            let _ = write!(
                line,
                "  captures {} = {} ({})",
                capture.name,
                capture.pointer,
                capture.pick.name()
            );
        }
        let _ = writeln!(out, "{line}");
    }
}

/// A flow's first request: its `vars` made, as a run makes them.
fn first_step(
    flow: &crate::plan::Flow,
    builder: &mut RequestBuilder,
    id: u64,
    rng: &mut SmallRng,
) -> bytes::Bytes {
    let vars = flow.start(rng);
    let step = &flow.steps[0];
    builder.begin(false);
    let entry = crate::rpc::Entry {
        method: step.row,
        call: 0,
        id: (!step.notification).then_some(id),
    };
    builder.push_with(&step.template, entry, rng, &vars);
    builder.finish()
}

/// Setup calls, polls, thresholds and the choices made for the user.
fn write_extras(
    out: &mut String,
    scenario: &Scenario,
    setup: &[SetupCall],
    polls: &[Poll],
    warnings: &[String],
) {
    for call in setup {
        let kind = match (call.notification, call.subscribe) {
            (_, true) => "subscription",
            (true, _) => "notification",
            _ => "call",
        };
        let _ = writeln!(
            out,
            "setup:       {kind} `{}` on each new connection",
            call.method
        );
    }
    for poll in polls.iter().filter(|p| !p.race) {
        // Nothing is sent here, so what the poll will answer is unknown.
        let _ = writeln!(
            out,
            "poll:        `{}` every {:?}; its answer must be a number or a hex quantity, which only the run can check (before anything is measured)",
            poll.name, poll.every
        );
    }
    if let Some(race) = &scenario.race {
        let timed = match race.every {
            Some(every) => format!("polled every {every:?} on average: the race's resolution"),
            None => "each notification timed as it arrives".to_string(),
        };
        let _ = writeln!(
            out,
            "race:        \"{}\" of {}'s results, matched across the targets ({timed}); run with --parallel-targets",
            race.pointer.as_str(),
            race.source
        );
    }
    for threshold in &scenario.thresholds {
        let _ = writeln!(out, "threshold:   {threshold} (a failure exits 2)");
    }
    for warning in warnings {
        let _ = writeln!(out, "warning:     {warning}");
    }
}

/// `SAMPLES` requests drawn as a run with the plan's seed would draw them.
fn write_samples(out: &mut String, scenario: &Scenario, plan: &LoadPlan, mix: &Mix, polls: &[Poll]) {
    let seed = plan.seed;
    let seeded = if scenario.seed.is_some() {
        format!("seed {seed}")
    } else {
        "a random seed".into()
    };
    let polled = if polls.is_empty() {
        ""
    } else {
        "; polled values read 0 until polled"
    };
    let flows = if mix.flows.is_empty() {
        ""
    } else {
        "; a flow's is its first step, the later ones depending on its answers"
    };
    let _ = writeln!(out, "\n{SAMPLES} sample requests ({seeded}{polled}{flows}):");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut builder = RequestBuilder::default();
    let mut planned: Vec<Planned> = Vec::new();
    let mut next_id = 1;
    for seq in 0..SAMPLES as u64 {
        let batch = match mix.next(seq, &mut rng, &mut planned) {
            None => break,
            Some(Next::Request { batch }) => batch,
            Some(Next::Flow(flow)) => {
                let flow = &mix.flows[flow as usize];
                let body = first_step(flow, &mut builder, next_id, &mut rng);
                next_id += 1;
                let _ = writeln!(out, "  {}", String::from_utf8_lossy(&body));
                continue;
            }
        };
        let body = mix.write(&mut builder, &planned, batch, next_id, &mut rng);
        next_id += planned.iter().filter(|p| !p.notification).count() as u64;
        let _ = writeln!(out, "  {}", String::from_utf8_lossy(&body));
    }
}
