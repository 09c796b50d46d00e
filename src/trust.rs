//! Which CA certificates HTTPS trusts, as far as the user chose them:
//! `SSL_CERT_FILE` and `SSL_CERT_DIR`.
//!
//! Every HTTPS client here (registries, logins, git mirrors, GitHub's API)
//! verifies servers with `rustls-platform-verifier`, whose roots on Linux
//! come from `rustls-native-certs`: when `SSL_CERT_FILE` (or
//! `SSL_CERT_DIR`) is set it reads *that* instead of the system's store.
//! A file that does not exist, cannot be read or holds no certificate is
//! skipped with a log line nobody sees; then every server fails with
//! `UnknownIssuer` (or no client can be made), and the error pointed at the
//! system store or `--insecure`, never at the variable the user set. So
//! [`check`] looks at the same variables, in the same process environment
//! the TLS stack reads (the one place outside the faces that reads it: it
//! must see what the verifier sees), before an HTTPS client is made, and
//! names the variable when it cannot be used.

use std::path::Path;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::error::{Error, Result};

/// `SSL_CERT_FILE` and `SSL_CERT_DIR` as the TLS stack will read them:
/// an error naming the variable when one is set and unusable.
pub fn check() -> Result<()> {
    check_vars(
        std::env::var_os("SSL_CERT_FILE").as_deref(),
        std::env::var_os("SSL_CERT_DIR").as_deref(),
    )
}

/// `SSL_CERT_FILE` when set: for a hint about an untrusted server.
pub fn cert_file() -> Option<String> {
    std::env::var_os("SSL_CERT_FILE").map(|f| f.to_string_lossy().into_owned())
}

/// [`check`] of the given values.
fn check_vars(file: Option<&std::ffi::OsStr>, dirs: Option<&std::ffi::OsStr>) -> Result<()> {
    if let Some(file) = file {
        check_file(Path::new(file))?;
    }
    if let Some(dirs) = dirs {
        for dir in std::env::split_paths(dirs).filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(unusable(
                    "SSL_CERT_DIR",
                    &dir,
                    "which is not a directory".to_string(),
                ));
            }
        }
    }
    Ok(())
}

/// `SSL_CERT_FILE`: a readable file holding at least one PEM certificate,
/// none of them broken.
fn check_file(path: &Path) -> Result<()> {
    if path.as_os_str().is_empty() {
        return Err(unusable("SSL_CERT_FILE", path, "which is empty".into()));
    }
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| {
        unusable(
            "SSL_CERT_FILE",
            path,
            format!("which cannot be read ({})", crate::error::error_chain(&e)),
        )
    })?;
    let mut certs = 0;
    for cert in iter {
        match cert {
            Ok(_) => certs += 1,
            Err(e) => {
                return Err(unusable(
                    "SSL_CERT_FILE",
                    path,
                    format!("which holds a broken certificate ({e})"),
                ));
            }
        }
    }
    if certs == 0 {
        return Err(unusable(
            "SSL_CERT_FILE",
            path,
            "which holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(())
}

fn unusable(var: &str, path: &Path, why: String) -> Error {
    Error::input(
        format!(
            "{var} is set to {}, {why}: HTTPS trusts only the certificates {var} names, instead of the \
             system's, so no server could be trusted",
            path.display()
        ),
        Some(format!(
            "point {var} at a PEM bundle that holds the CA of the servers (the system's \
             /etc/ssl/certs/ca-certificates.crt with your CA added), or unset it to use the system's store"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_variable_must_name_usable_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let os = |p: &Path| p.as_os_str().to_owned();
        assert!(check_vars(None, None).is_ok());
        let missing = dir.path().join("missing.pem");
        let e = check_vars(Some(&os(&missing)), None).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "SSL_CERT_FILE is set to {}, which cannot be read (",
                missing.display()
            )),
            "{e}"
        );
        assert_eq!(e.exit_code(), 2);
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let e = check_vars(Some(&os(&empty)), None).unwrap_err();
        assert!(
            e.to_string().contains("which holds no PEM certificate"),
            "{e}"
        );
        assert!(e.hint().unwrap().contains("unset it"), "{e:?}");
        let e = check_vars(Some(std::ffi::OsStr::new("")), None).unwrap_err();
        assert!(e.to_string().contains("which is empty"), "{e}");
        let e = check_vars(None, Some(&os(&missing))).unwrap_err();
        assert!(
            e.to_string().starts_with("SSL_CERT_DIR is set to ")
                && e.to_string().contains("which is not a directory"),
            "{e}"
        );
        assert!(check_vars(None, Some(&os(dir.path()))).is_ok());
    }
}
