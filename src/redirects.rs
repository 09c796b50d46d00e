//! The redirect rule the clients that carry a token in their own headers
//! share (the logins' exchanges, GitHub's REST API): a redirect within one
//! origin is followed, one to another origin is not, so the 3xx answer
//! comes back to the caller, which names both hosts. reqwest alone would
//! follow it and drop only `Authorization` and cookies on the way.

use reqwest::redirect::Policy;

/// Follows at most `max` redirects, each within the first request's origin.
pub fn within_origin(max: usize) -> Policy {
    Policy::custom(move |attempt| {
        let first = attempt.previous().first().map(|u| u.origin());
        if attempt.previous().len() > max {
            attempt.error(format!("more than {max} redirects"))
        } else if first == Some(attempt.url().origin()) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}
