//! Sticky draws for a weighted route (`routes[].sticky`): the draw that
//! picks a call's model is a hash of the route's name and the client's
//! key (a request header's value, or its tenant) instead of a random
//! number, so the same client lands on the same model while the weights
//! stay the same. Without a key the call draws at random.

use crate::config::sticky_section::StickyConfig;
use http::HeaderMap;
use router_policies::Draw;

/// The route's sticky draw for a call with these `headers` and `tenant`
/// (`None`: no key; draw at random).
pub fn draw(route: &str, sticky: &StickyConfig, headers: &HeaderMap, tenant: Option<&str>) -> Option<Draw> {
    let key: &[u8] = match sticky {
        StickyConfig::Header(name) => headers.get(name.as_str())?.as_bytes(),
        StickyConfig::Tenant => tenant?.as_bytes(),
    };
    let mut hasher = blake3::Hasher::new();
    hasher.update(&(route.len() as u64).to_le_bytes());
    hasher.update(route.as_bytes());
    hasher.update(key);
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_bytes()[..8]);
    Some(Draw::from_bits(u64::from_le_bytes(first)))
}

/// The draw that decides whether a call is a canary's (a candidate with
/// `serve = true` answers calls whose draw is below its share): derived
/// from the route's sticky draw when the call has one, so one client is
/// on the same side for a whole step (and stays on the candidate's side as
/// the share grows), yet independent of the weighted split's draw (the
/// digits below the draw's first 20 bits); a fresh random draw otherwise.
pub fn canary_draw(sticky: Option<Draw>) -> Draw {
    match sticky {
        Some(draw) => Draw::new((draw.value() * (1u64 << 20) as f64).fract()),
        None => crate::random_draws::next_draw(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_one_draw_and_keys_spread() {
        let by = StickyConfig::Header("x-user".into());
        let mut headers = HeaderMap::new();
        assert!(draw("r", &by, &headers, Some("t")).is_none(), "no header: a random draw");
        headers.insert("x-user", "alice".parse().unwrap());
        let a = draw("r", &by, &headers, None).unwrap();
        assert_eq!(a, draw("r", &by, &headers, None).unwrap());
        assert_ne!(a, draw("other", &by, &headers, None).unwrap(), "routes split independently");
        let t = StickyConfig::Tenant;
        assert!(draw("r", &t, &headers, None).is_none());
        assert_eq!(draw("r", &t, &headers, Some("acme")), draw("r", &t, &HeaderMap::new(), Some("acme")));
        let low = (0..1000)
            .filter(|i| draw("r", &t, &headers, Some(&format!("tenant-{i}"))).unwrap().value() < 0.5)
            .count();
        assert!((400..600).contains(&low), "{low} of 1000 below 0.5");
    }

    #[test]
    fn a_canary_draw_is_fixed_per_key_and_spread_apart_from_the_split() {
        let t = StickyConfig::Tenant;
        let headers = HeaderMap::new();
        let of = |i: usize| draw("r", &t, &headers, Some(&format!("tenant-{i}")));
        assert_eq!(canary_draw(of(7)), canary_draw(of(7)), "one client, one side");
        let (mut canary, mut both) = (0, 0);
        for i in 0..2000 {
            let (split, c) = (of(i).unwrap().value(), canary_draw(of(i)).value());
            canary += usize::from(c < 0.25);
            both += usize::from(c < 0.25 && split < 0.5);
        }
        assert!((400..600).contains(&canary), "{canary} of 2000 below 0.25");
        assert!((150..350).contains(&both), "{both}: the canary side is independent of the split");
    }
}
