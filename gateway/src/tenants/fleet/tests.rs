use super::*;

fn limits(requests: Option<Rate>, per_day: Option<u64>) -> TenantLimits {
    TenantLimits {
        requests,
        rows: Some(Rate { per_s: 7.0, burst: 7 }),
        concurrent: Some(3),
        requests_per_day: per_day,
    }
}

/// The bytes of each argument of `cmd`, as text.
fn args(cmd: &Cmd) -> Vec<String> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => "<not a plain argument>".into(),
        })
        .collect()
}

#[test]
fn a_tenants_keys_share_one_hash_tag_and_scopes_do_not_collide() {
    let (rate, day) = scope_keys("sy", "team-a", None);
    assert_eq!(rate, "sy:tenant:{team-a}:all:rate");
    assert_eq!(day, "sy:tenant:{team-a}:all:day");
    let (rate, day) = scope_keys("sy", "team-a", Some("digits"));
    assert_eq!(rate, "sy:tenant:{team-a}:route:digits:rate");
    assert_eq!(day, "sy:tenant:{team-a}:route:digits:day");
}

/// The hash tag Redis Cluster takes from `key`: the text between the
/// first `{` and the next `}`, when not empty.
fn hash_tag(key: &str) -> &str {
    let Some(open) = key.find('{') else { return key };
    match key[open + 1..].find('}') {
        Some(0) | None => key,
        Some(len) => &key[open + 1..open + 1 + len],
    }
}

#[test]
fn names_that_could_break_the_tag_or_the_layout_are_hex() {
    let (rate, _) = scope_keys("sy", "a}b", Some("x:all"));
    assert_eq!(rate, "sy:tenant:{%617d62}:route:%783a616c6c:rate");
    // A route named like the across-routes scope stays a route.
    assert_ne!(scope_keys("sy", "t", Some("all")).0, scope_keys("sy", "t", None).0);
    // A plain name cannot pass for an encoded one: `%` is never plain.
    assert_ne!(scope_keys("sy", "%61", None).0, scope_keys("sy", "a", None).0);
    for tenant in ["team-a", "a}b", "{x}", "", "émile"] {
        let tags: Vec<String> = [None, Some("r"), Some("r}{")]
            .into_iter()
            .flat_map(|route| {
                let (rate, day) = scope_keys("ns{x}", tenant, route);
                [rate, day]
            })
            .map(|key| hash_tag(key.trim_start_matches("ns{x}")).to_string())
            .collect();
        assert!(tags.iter().all(|t| t == &tags[0]), "{tenant:?}: {tags:?}");
    }
}

#[test]
fn the_command_names_each_scopes_keys_then_its_limits() {
    let route = limits(Some(Rate { per_s: 4.0, burst: 8 }), None);
    let tenant = limits(None, Some(50));
    let cmd = command("sy", "t", &[(Some("r"), route), (None, tenant)]);
    let a = args(&cmd);
    assert_eq!(a[0], "EVAL");
    assert_eq!(a[1], SCRIPT);
    assert_eq!(
        a[2..],
        [
            "4",
            "sy:tenant:{t}:route:r:rate",
            "sy:tenant:{t}:route:r:day",
            "sy:tenant:{t}:all:rate",
            "sy:tenant:{t}:all:day",
            "250000",
            "8",
            "0",
            "0",
            "0",
            "50"
        ]
    );
}

#[test]
fn the_scripts_answers_are_read_and_odd_ones_refused() {
    let admitted = Value::Array(vec![0, 0, 0, 7, -1, -1, 49].into_iter().map(Value::Int).collect());
    assert_eq!(
        verdict(&admitted, 2),
        Some(Verdict::Admitted(vec![
            Standing { requests_left: Some(7), day_left: None },
            Standing { requests_left: None, day_left: Some(49) },
        ]))
    );
    let daily = Value::Array(vec![Value::Int(1), Value::Int(2), Value::Int(3_500_000)]);
    assert_eq!(
        verdict(&daily, 2),
        Some(Verdict::Refused { scope: 1, kind: LimitKind::Daily, retry_after: Duration::from_millis(3500) })
    );
    let rate = Value::Array(vec![Value::Int(2), Value::Int(1), Value::Int(250)]);
    assert_eq!(
        verdict(&rate, 1),
        Some(Verdict::Refused {
            scope: 0,
            kind: LimitKind::Requests,
            retry_after: Duration::from_micros(250)
        })
    );
    assert_eq!(verdict(&admitted, 3), None, "a standing per scope");
    assert_eq!(verdict(&Value::Array(vec![Value::Int(2), Value::Int(3), Value::Int(1)]), 2), None);
    assert_eq!(verdict(&Value::Array(vec![Value::Int(9), Value::Int(1), Value::Int(1)]), 1), None);
    assert_eq!(verdict(&Value::Nil, 1), None);
    assert_eq!(verdict(&Value::Array(vec![Value::Nil, Value::Int(0), Value::Int(0)]), 0), None);
}

#[test]
fn the_local_share_divides_rates_bursts_and_quotas_only() {
    let full = limits(Some(Rate { per_s: 100.0, burst: 10 }), Some(50));
    let share = local_share(&full, 4);
    assert_eq!(share.requests, Some(Rate { per_s: 25.0, burst: 2 }));
    assert_eq!(share.requests_per_day, Some(12));
    assert_eq!((share.rows, share.concurrent), (full.rows, full.concurrent), "compute is per replica");
    let tiny = local_share(&limits(Some(Rate { per_s: 1.0, burst: 1 }), Some(1)), 8);
    assert_eq!((tiny.requests.map(|r| r.burst), tiny.requests_per_day), (Some(1), Some(1)), "never zero");
    assert_eq!(local_share(&full, 0), full, "0 replicas is read as 1");
    assert!(held_by_fleet(&full));
    assert!(!held_by_fleet(&limits(None, None)), "rows and concurrent are local");
}
