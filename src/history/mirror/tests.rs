//! Unit tests of the mirror (`history/mirror/mod.rs`), kept apart so the
//! module itself stays under 700 lines.

use super::*;

#[test]
fn flux_secrets_map_to_credentials() {
    let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    };
    let url = "https://git.example.com/team/settings.git";
    let basic =
        Remote::from_flux(url, Some(&data(&[("username", "u"), ("password", "p")]))).unwrap();
    assert_eq!(
        basic.credentials(),
        Some(&Credentials::Basic {
            username: "u".into(),
            password: "p".into()
        })
    );
    let bearer = Remote::from_flux(url, Some(&data(&[("bearerToken", "t0k\n")]))).unwrap();
    assert_eq!(
        bearer.credentials(),
        Some(&Credentials::Bearer("t0k".into()))
    );
    let none = Remote::from_flux(url, Some(&data(&[("known_hosts", "x")]))).unwrap();
    assert_eq!(none.credentials(), None);
    for (pairs, key) in [
        (&[("password", "secret-pw")][..], "`username`"),
        (
            &[("username", "u"), ("bearerToken", "secret-tk")][..],
            "bearerToken",
        ),
        (&[("ca.crt", "not a certificate")][..], "ca.crt"),
    ] {
        let e = Remote::from_flux(url, Some(&data(pairs)))
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{e}");
        assert!(!e.contains("secret-"), "{e}");
    }
    let shown = format!("{:?}", basic.credentials());
    assert!(!shown.contains("\"p\""), "{shown}");
    assert!(!format!("{bearer:?}").contains("t0k"));
}

#[test]
fn urls_are_http_without_credentials() {
    for ok in [
        "https://h/x.git",
        "http://127.0.0.1:8080/r.git",
        " https://h/a/b ",
    ] {
        assert!(Remote::new(ok).is_ok(), "{ok}");
    }
    // Each refusal names the URL (without any credentials in it) and why.
    for (bad, says) in [
        (
            "ssh://git@h/x.git",
            "spec.url \"ssh://h/x.git\" has the scheme ssh: only https:// and http:// are \
             fetched (no ssh or git://)",
        ),
        (
            "git@h:x.git",
            "spec.url \"git@h:x.git\" is not a URL (relative URL without a base)",
        ),
        (
            "https://u:pa55w0rd@h/x.git",
            "spec.url \"https://h/x.git\" carries credentials: put them into the Secret the \
             secretRef names",
        ),
        (
            "https://tok3n@h/x.git",
            "spec.url \"https://h/x.git\" carries credentials: put them into the Secret the \
             secretRef names",
        ),
        (
            "https://u:pa55w0rd@h/x y",
            "spec.url \"https://h/x y\" holds spaces, quotes or control characters",
        ),
        (
            "https://h/x\".git",
            "spec.url \"https://h/x\\\".git\" holds spaces, quotes or control characters",
        ),
        (
            "https://h/x y",
            "spec.url \"https://h/x y\" holds spaces, quotes or control characters",
        ),
        (
            "file:///srv/x.git",
            "spec.url \"file:///srv/x.git\" has the scheme file: only https:// and http:// \
             are fetched (no ssh or git://)",
        ),
        (
            "https://h/x#frag",
            "spec.url \"https://h/x#frag\" has a #fragment",
        ),
    ] {
        let e = Remote::new(bad).unwrap_err();
        assert_eq!(e.to_string(), says, "{bad}");
        assert_eq!(e.exit_code(), 2, "{bad}");
        let hint = e.hint().unwrap_or_default();
        assert_eq!(
            hint,
            "give the repository's https:// (or http://) URL, credentials in the secretRef"
        );
        for secret in ["pa55w0rd", "tok3n"] {
            assert!(!e.to_string().contains(secret), "{bad}: {e}");
        }
    }
}

#[test]
fn folders_are_repository_relative() {
    assert_eq!(folder_path("configs/shop").unwrap(), "configs/shop");
    assert_eq!(folder_path("./configs/shop/").unwrap(), "configs/shop");
    assert_eq!(folder_path(".").unwrap(), "");
    assert_eq!(folder_path("").unwrap(), "");
    for (bad, why) in [
        ("/etc", "is absolute"),
        ("configs/../..", "leaves the repository (..)"),
        ("..", "leaves the repository (..)"),
        (".git/objects", "is inside .git"),
        ("a/.git", "is inside .git"),
    ] {
        let e = folder_path(bad).unwrap_err();
        assert_eq!(e.to_string(), format!("--path {bad:?} {why}"));
        assert_eq!(
            e.render(&crate::controller::spec::Spec),
            format!("spec.path {bad:?} {why}")
        );
        assert_eq!(e.exit_code(), 2, "{bad}");
    }
}

#[test]
fn branches_and_commits_are_checked() {
    assert_eq!(branch_ref("main").unwrap(), "refs/heads/main");
    assert_eq!(branch_ref("release/1.x").unwrap(), "refs/heads/release/1.x");
    assert_eq!(branch_ref("refs/heads/main").unwrap(), "refs/heads/main");
    for bad in [
        "",
        "-x",
        "a..b",
        "a b",
        "a:b",
        "x.lock",
        "a/",
        "refs/heads/a b",
    ] {
        let e = branch_ref(bad).unwrap_err();
        let shown = bad.strip_prefix("refs/heads/").unwrap_or(bad);
        assert_eq!(
            e.to_string(),
            format!("the branch {shown:?} is not a valid branch name")
        );
        assert_eq!(e.exit_code(), 2, "{bad}");
    }
    let id = "0123456789ABCDEF0123456789abcdef01234567";
    assert_eq!(commit_id(id).unwrap(), id.to_ascii_lowercase());
    assert_eq!(
        commit_id("0123abc").unwrap_err().to_string(),
        "\"0123abc\" is not a full commit id"
    );
    let sha256 = commit_id(&"a".repeat(64)).unwrap_err().to_string();
    assert!(sha256.contains("SHA-256"), "{sha256}");
}
