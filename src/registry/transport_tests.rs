//! Unit tests of the transport's pure parts.

use super::*;

#[test]
fn registry_error_bodies_are_summarised() {
    let body = br#"{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}"#;
    assert_eq!(
        describe(StatusCode::NOT_FOUND, body),
        "HTTP 404 Not Found: NAME_UNKNOWN: repository name not known to registry"
    );
    assert_eq!(
        describe(StatusCode::BAD_GATEWAY, b""),
        "HTTP 502 Bad Gateway"
    );
}

#[test]
fn retry_after_forms() {
    // RFC 9110's example date, and "now" five seconds before it.
    let now: jiff::Timestamp = "1994-11-06T08:49:32Z".parse().unwrap();
    let date = "Sun, 06 Nov 1994 08:49:37 GMT";
    assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
    assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
    assert_eq!(
        parse_retry_after("100000", now),
        Some(Duration::from_secs(30))
    );
    assert_eq!(parse_retry_after(date, now), Some(Duration::from_secs(5)));
    // A day before it: capped; a second after it: no wait.
    let day_before: jiff::Timestamp = "1994-11-05T08:49:37Z".parse().unwrap();
    assert_eq!(
        parse_retry_after(date, day_before),
        Some(Duration::from_secs(30))
    );
    let after: jiff::Timestamp = "1994-11-06T08:49:38Z".parse().unwrap();
    assert_eq!(parse_retry_after(date, after), Some(Duration::ZERO));
    assert_eq!(parse_retry_after("soon", now), None);
    assert_eq!(parse_retry_after("-5", now), None);
}

/// Attempt n waits 50% to 100% of 200 ms * 2^(n-1), at most 30 s.
#[test]
fn backoff_doubles_within_its_jitter_and_is_capped() {
    let nominal_ms = |a: u32| (200u64 << (a - 1).min(16)).min(30_000);
    assert_eq!(
        [1, 2, 3, 4, 8, 9, 40].map(nominal_ms),
        [200, 400, 800, 1_600, 25_600, 30_000, 30_000]
    );
    for a in 1..40 {
        let n = nominal_ms(a);
        for _ in 0..20 {
            let d = backoff(a).as_millis() as u64;
            assert!(
                n / 2 <= d && d <= n,
                "attempt {a}: {d} ms, not in {}..={n}",
                n / 2
            );
        }
    }
}
