//! `settings-image verify`: proof that an image in a registry is exactly
//! the settings folder at the commit it names.
//!
//! The image says which commit it holds (`org.opencontainers.image.revision`)
//! and its provenance referrer says which folder; the checkout rebuilds that
//! folder from that commit with the same pure builder `push` uses, and the
//! rebuilt manifest digest must equal the pushed one (and the registry must
//! serve every blob with exactly the rebuilt bytes). A timestamp tag in the
//! reference must name the same commit and committer time. Annotations and
//! labels the pusher added (the action's `annotations`/`labels`, `push
//! --annotation/--label`) are rebuilt from the image's own provenance,
//! which records them; anything else on the image is a mismatch.
//!
//! Why rebuild and not trust the provenance: the provenance is a claim made
//! by whoever pushed; only a byte-reproducible rebuild proves the bytes.
//! Why compare tar entries on a mismatch: "digest differs" says nothing a
//! reviewer can act on; the first differing file does.

mod explain;
mod layer;

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::field::{Field, Text};
use crate::history::{self, Checkout, SourceMode, github};
use crate::image::artifact::ManifestView;
use crate::image::{self, ANNOTATION_REVISION, ANNOTATION_SOURCE, Descriptor, MANIFEST_MEDIA_TYPE};
use crate::provenance;
use crate::registry::{self, Client, Credentials};

/// What to verify.
#[derive(Debug, Clone)]
pub struct Verification {
    /// `HOST/NAME:TAG`, `HOST/NAME:TAG@sha256:...` or `HOST/NAME@sha256:...`.
    pub reference: String,
    /// The settings folder in a checkout of the settings repository.
    pub path: PathBuf,
    /// Plain HTTP for a non-loopback registry.
    pub insecure: bool,
    /// Pull credentials.
    pub credentials: Option<Credentials>,
    /// Docker's `config.json`, asked when `credentials` is `None`.
    pub docker_config: Option<PathBuf>,
    /// The GitHub API for the shallow-clone fallback, as `push` uses it.
    pub github: Option<github::Api>,
}

/// A reference split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `HOST/NAME`.
    pub repository: String,
    /// The tag, when given.
    pub tag: Option<String>,
    /// The digest, when given.
    pub digest: Option<String>,
}

/// Splits `HOST/NAME[:TAG][@sha256:HEX]`; at least one of tag and digest.
pub fn parse_reference(s: &str) -> Result<Reference> {
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => (r, Some(d.to_string())),
        None => (s, None),
    };
    let (repository, tag) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains('/') => (&rest[..i], Some(rest[i + 1..].to_string())),
        _ => (rest, None),
    };
    if let Some(t) = &tag {
        crate::tag::validate(t)?;
    }
    // The digest syntax and the repository name: inspect's parser checks both.
    crate::inspect::parse_reference(s)?;
    Ok(Reference {
        repository: repository.to_string(),
        tag,
        digest,
    })
}

/// What verify found about one image.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// The reference as given.
    pub reference: String,
    /// The pushed manifest digest.
    pub digest: String,
    /// The commit the image records and was rebuilt from.
    pub commit: String,
    /// The folder, relative to the settings repository's root.
    pub path: String,
    /// Blobs compared byte for byte (config and layer).
    pub blobs: usize,
    /// Regular files in the layer.
    pub files: usize,
    /// Things worth knowing that do not fail verification.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn mismatch(reference: &str, reason: impl Into<Text>, file: Option<String>) -> Error {
    Error::Mismatch {
        reference: reference.to_string(),
        reason: reason.into(),
        file,
    }
}

/// Checks that `--path` names a folder, before any registry request: a
/// typo is bad input (exit 2), not an image that fails to verify.
pub fn check_path(path: &std::path::Path) -> Result<()> {
    let message = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => "is not a folder",
        Err(_) => "does not exist",
    };
    Err(Error::Source {
        path: path.to_path_buf(),
        message: message.into(),
        hint: Some(crate::text![
            "give ",
            Field::Path,
            " the settings folder in a checkout of the settings repository"
        ]),
    })
}

/// Verifies one reference against the checkout holding `req.path`.
pub fn verify(req: &Verification) -> Result<Verified> {
    let r = parse_reference(&req.reference)?;
    check_path(&req.path)?;
    let client = Client::open_read_only(&registry::Options {
        insecure: req.insecure,
        credentials: req.credentials.clone(),
        docker_config: req.docker_config.clone(),
        ..registry::Options::new(r.repository.clone())
    })?;
    verify_with(&client, &r, req)
}

/// [`verify`] with an open client (the scan reuses one per repository).
pub fn verify_with(client: &Client, r: &Reference, req: &Verification) -> Result<Verified> {
    let shown = req.reference.as_str();
    let mut notes = Vec::new();
    let asked = r.digest.as_deref().or(r.tag.as_deref()).unwrap_or_default();
    let not_found = |what: &str| Error::Registry {
        reference: shown.to_string(),
        what: format!("reading {what}"),
        message: "no such manifest".into(),
        hint: Some("check the reference; the image may have been deleted".into()),
    };
    let m = client
        .get_manifest(asked)?
        .ok_or_else(|| not_found(asked))?;
    // With both, the digest is what runs; the tag must still name it.
    if let (Some(tag), Some(digest)) = (&r.tag, &r.digest) {
        let now = client.head_manifest(tag)?.map(|d| d.digest);
        if now.as_deref() != Some(digest.as_str()) {
            let now = now.unwrap_or_else(|| "nothing".into());
            if crate::tag::is_timestamp_tag(tag) {
                return Err(mismatch(
                    shown,
                    format!(
                        "the timestamp tag {tag} now names {now}, not {digest}: a timestamp tag never moves, so it was re-pointed"
                    ),
                    None,
                ));
            }
            notes.push(format!(
                "tag {tag} now names {now}; verified the pinned digest {digest}"
            ));
        }
    }
    if m.media_type != MANIFEST_MEDIA_TYPE {
        return Err(mismatch(
            shown,
            format!(
                "the manifest is {}, not a single-platform OCI image manifest as settings-image pushes",
                m.media_type
            ),
            None,
        ));
    }
    let view = ManifestView::parse(&m.bytes)?;
    let Some(revision) = view.annotations.get(ANNOTATION_REVISION).cloned() else {
        return Err(mismatch(
            shown,
            format!("the image has no {ANNOTATION_REVISION} annotation, so it names no commit"),
            None,
        ));
    };
    // A timestamp tag names a commit: its short id must be the revision's.
    let stamp = r.tag.as_deref().and_then(parse_timestamp_tag);
    if let (Some(tag), Some((_, sha7))) = (&r.tag, &stamp)
        && !revision.starts_with(sha7.as_str())
    {
        return Err(mismatch(
            shown,
            format!(
                "the tag {tag} names commit {sha7}, but the image it points to records commit {revision}: the tag was re-pointed to another commit's image"
            ),
            None,
        ));
    }
    let statements = read_provenance(client, &m.digest, &revision, shown)?;
    let prov = &statements[0];
    // One checkout for the folder's place and the history walk.
    let checkout =
        Checkout::open(&req.path, req.github.clone())?.ok_or_else(|| Error::History {
            path: req.path.clone(),
            message: "is not inside a git repository, so no commit can be rebuilt".into(),
            hint: Some(crate::text![
                "give ",
                Field::Path,
                " the settings folder in a checkout of the settings repository"
            ]),
        })?;
    let folder = checkout.repo().display_path();
    if let Some(p) = &prov.path
        && p != &folder
    {
        return Err(mismatch(
            shown,
            crate::text![
                format!("the provenance says the image holds folder {p}, but "),
                Field::Path,
                format!(" names {folder}")
            ],
            None,
        ));
    }
    // The same history question and the same errors as `push`.
    let reading = history::Reading {
        mode: SourceMode::Commit,
        need_commit: true,
        revision: Some(&revision),
        // The image's own source URL is rebuilt with (`rebuild_metadata`).
        source_url: &crate::history::SourceUrl::Origin,
        several: false,
    };
    let (_, prepared) = history::prepare(vec![(&req.path, Ok(Some(checkout)))], &reading)
        .pop()
        .unwrap_or_else(|| Err(Error::history(&req.path, "was not read", None)))?;
    let Some(commit) = prepared.commit.clone() else {
        return Err(Error::history(&req.path, "has no commit to rebuild", None));
    };
    if commit.id != revision {
        return Err(mismatch(
            shown,
            format!(
                "the image records commit {revision}, but the last commit that changed {folder} up to it is {}: the image was not built from {folder} at that commit",
                commit.id
            ),
            None,
        ));
    }
    if let (Some(tag), Some((ts, _))) = (&r.tag, &stamp)
        && *ts != commit.timestamp
    {
        return Err(mismatch(
            shown,
            format!(
                "the tag {tag} says committer time {ts}, but commit {revision} was committed at {} ({})",
                commit.timestamp,
                commit.committed_at()
            ),
            None,
        ));
    }
    // Each distinct set of caller annotations and labels the statements
    // attest (one, unless a statement predates them): the image must be
    // the commit's folder with exactly one of them, nothing else.
    let mut attested: Vec<image::Metadata> = Vec::new();
    for st in &statements {
        if !attested
            .iter()
            .any(|a| a.annotations == st.annotations && a.labels == st.labels)
        {
            attested.push(image::Metadata {
                annotations: st.annotations.clone(),
                labels: st.labels.clone(),
            });
        }
    }
    let mut first = None;
    let mut rebuilt = None;
    for added in &attested {
        let img = image::build(&prepared.source, &rebuild_metadata(&prepared, &view, added))?;
        if img.digest == m.digest {
            rebuilt = Some(img);
            break;
        }
        first.get_or_insert(img);
    }
    let Some(rebuilt) = rebuilt else {
        let Some(first) = first else {
            return Err(mismatch(
                shown,
                "the image's provenance could not be read",
                None,
            ));
        };
        let (reason, file) = explain::explain(client, &view, &first, &revision, &folder)?;
        return Err(mismatch(shown, reason, file));
    };
    // Same manifest; the registry must also serve the same bytes.
    let config = client.get_blob(&rebuilt.config_descriptor.digest)?;
    if config != rebuilt.config {
        return Err(mismatch(
            shown,
            "the registry serves another config blob under the manifest's config digest",
            None,
        ));
    }
    let layer = client.get_blob(&rebuilt.layer.digest)?;
    if image::sha256_digest(&layer) != rebuilt.layer.digest {
        return Err(mismatch(
            shown,
            "the registry serves another layer blob under the manifest's layer digest",
            None,
        ));
    }
    Ok(Verified {
        reference: shown.to_string(),
        digest: m.digest,
        commit: revision,
        path: folder,
        blobs: 2,
        files: rebuilt.files,
        notes,
    })
}

/// What the push built the image with: the history's metadata and the
/// caller's additions a statement attests, merged by the push's own rules
/// (the history's revision and created win). The source URL is the
/// pusher's environment, not the commit's: it is taken from the image,
/// unless the statement says the caller added it (the push had none).
fn rebuild_metadata(
    prepared: &history::Prepared,
    view: &ManifestView,
    added: &image::Metadata,
) -> image::Metadata {
    let mut meta = prepared.metadata();
    let callers = added.annotations.contains_key(ANNOTATION_SOURCE)
        || added.labels.contains_key(ANNOTATION_SOURCE);
    match view.annotations.get(ANNOTATION_SOURCE) {
        Some(url) if !callers => {
            meta.annotations
                .insert(ANNOTATION_SOURCE.into(), url.clone());
            meta.labels.insert(ANNOTATION_SOURCE.into(), url.clone());
        }
        _ => {
            meta.annotations.remove(ANNOTATION_SOURCE);
            meta.labels.remove(ANNOTATION_SOURCE);
        }
    }
    crate::request::merge_metadata(meta, added, &mut Vec::new()).0
}

/// `<prefix>-<ts>-<sha7>` -> (ts, sha7).
fn parse_timestamp_tag(tag: &str) -> Option<(i64, String)> {
    if !crate::tag::is_timestamp_tag(tag) {
        return None;
    }
    let (rest, sha) = tag.rsplit_once('-')?;
    let (_, ts) = rest.rsplit_once('-')?;
    Some((ts.parse().ok()?, sha.to_string()))
}

/// The provenance statements of the image for `revision` (at least one);
/// their absence, or only statements about another image or commit, is a
/// mismatch.
fn read_provenance(
    client: &Client,
    digest: &str,
    revision: &str,
    shown: &str,
) -> Result<Vec<provenance::Summary>> {
    let list = client.referrers(digest, Some(provenance::ARTIFACT_TYPE))?;
    let list: Vec<&Descriptor> = list
        .iter()
        .filter(|d| d.artifact_type.as_deref() == Some(provenance::ARTIFACT_TYPE))
        .collect();
    if list.is_empty() {
        return Err(mismatch(
            shown,
            crate::text![
                "the image has no provenance referrer: nothing attests which folder of which commit it was \
                 built from (pushed with ",
                Field::NoProvenance,
                " or by another tool, or changed after the push: an annotation or label added by hand makes a \
                 new digest that no provenance names); push it again with provenance"
            ],
            None,
        ));
    }
    let mut last = None;
    let mut found = Vec::new();
    for d in list {
        let layer = client.referrer_layer(d, provenance::ARTIFACT_TYPE)?;
        let bytes = client.get_blob(&layer.digest)?;
        let s = provenance::read_statement(&bytes, digest)?;
        if s.subject_matches && s.commit.as_deref() == Some(revision) {
            found.push(s);
        } else {
            last = Some(s);
        }
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let why = match last {
        Some(s) if !s.subject_matches => "its subject is another image".to_string(),
        Some(s) => format!(
            "it names commit {}, the image {revision}",
            s.commit.as_deref().unwrap_or("(none)")
        ),
        None => "it could not be read".to_string(),
    };
    Err(mismatch(
        shown,
        format!("the image's provenance does not attest it: {why}"),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::layer::{Entry, first_difference};
    use super::*;
    use crate::image::gunzip::Gunzip;

    #[test]
    fn references_split_into_tag_and_digest() {
        let d = format!("sha256:{}", "a".repeat(64));
        let r = parse_reference(&format!("127.0.0.1:5000/x/y:main-1-abcdef0@{d}")).unwrap();
        assert_eq!(r.repository, "127.0.0.1:5000/x/y");
        assert_eq!(r.tag.as_deref(), Some("main-1-abcdef0"));
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        let r = parse_reference("127.0.0.1:5000/x/y:latest").unwrap();
        assert_eq!((r.tag.as_deref(), r.digest), (Some("latest"), None));
        assert!(parse_reference("127.0.0.1:5000/x/y").is_err());
        assert!(parse_reference("ghcr.io/x@sha256:00").is_err());
        assert_eq!(
            parse_timestamp_tag("feature-x-1700000000-abcdef0"),
            Some((1_700_000_000, "abcdef0".into()))
        );
        assert_eq!(parse_timestamp_tag("latest"), None);
    }

    #[test]
    fn gunzip_streams_in_any_piece_size_and_stops_at_the_limit() {
        use std::io::Read as _;
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut w = crate::image::gzip::GzipWriter::new(Vec::new()).unwrap();
        w.write_all(&data).unwrap();
        let gz = w.finish().unwrap();
        let read_all = |g: &mut Gunzip<'_>, piece: usize| {
            let mut out = Vec::new();
            let mut buf = vec![0u8; piece];
            loop {
                match g.read(&mut buf) {
                    Ok(0) => return Ok(out),
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(e) => return Err(e),
                }
            }
        };
        for piece in [1, 7, 512, 1 << 20] {
            let mut g = Gunzip::new(&gz, data.len() as u64).unwrap();
            assert_eq!(read_all(&mut g, piece).unwrap(), data, "{piece}");
            assert!(!g.over_limit());
        }
        let mut g = Gunzip::new(&gz, data.len() as u64 - 1).unwrap();
        assert!(read_all(&mut g, 4096).is_err());
        assert!(g.over_limit());
        let mut g = Gunzip::new(&gz[..gz.len() / 2], u64::MAX).unwrap();
        let e = read_all(&mut g, 4096).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        assert!(!g.over_limit());
        assert!(Gunzip::new(b"plain text, not gzip at all", u64::MAX).is_err());
    }

    /// `data` as one gzip member of this crate's writer.
    fn member(data: &[u8]) -> Vec<u8> {
        let mut w = crate::image::gzip::GzipWriter::new(Vec::new()).unwrap();
        w.write_all(data).unwrap();
        w.finish().unwrap()
    }

    fn gunzip_all(gz: &[u8]) -> std::result::Result<Vec<u8>, String> {
        use std::io::Read as _;
        let mut g = Gunzip::new(gz, u64::MAX)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 3000];
        loop {
            match g.read(&mut buf) {
                Ok(0) => return Ok(out),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    #[test]
    fn gunzip_reads_every_member_and_checks_each_trailer() {
        let a: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
        let b = b"the second member".to_vec();
        let mut gz = member(&a);
        gz.extend(member(&[]));
        gz.extend(member(&b));
        assert_eq!(gunzip_all(&gz).unwrap(), [a.clone(), b.clone()].concat());
        // A CRC-32 or a size that is not the member's data.
        let first = member(&a);
        let mut crc = first.clone();
        let at = first.len() - 8;
        crc[at] ^= 1;
        crc.extend(member(&b));
        let e = gunzip_all(&crc).unwrap_err();
        assert!(e.contains("gzip member 1's CRC-32"), "{e}");
        let mut size = member(&a);
        size.extend(member(&b));
        // ISIZE: the last 4 bytes of the last member.
        let at = size.len() - 4;
        size[at] ^= 1;
        let e = gunzip_all(&size).unwrap_err();
        assert!(e.contains("gzip member 2 says it holds"), "{e}");
        // A member without its trailer, and bytes after the last member
        // that are no member.
        let e = gunzip_all(&first[..first.len() - 3]).unwrap_err();
        assert!(e.contains("trailer") || e.contains("truncated"), "{e}");
        let mut junk = first.clone();
        junk.extend(b"trailing junk, not a gzip member");
        let e = gunzip_all(&junk).unwrap_err();
        assert!(e.contains("after gzip member 1: not gzip"), "{e}");
    }

    #[test]
    fn the_first_difference_names_the_file() {
        let e = |c: &str| Entry {
            kind: b'0',
            mode: 0o644,
            link: None,
            content: c.into(),
        };
        let a = vec![("a.yaml".into(), e("1")), ("b.yaml".into(), e("2"))];
        let mut b = a.clone();
        assert_eq!(first_difference(&a, &b), None);
        b[1].1 = e("3");
        assert_eq!(
            first_difference(&a, &b),
            Some(("b.yaml".into(), "b.yaml: different content".into()))
        );
        b.push(("0.yaml".into(), e("0")));
        assert_eq!(
            first_difference(&a, &b),
            Some((
                "0.yaml".into(),
                "missing file 0.yaml: in the commit, not in the image".into()
            ))
        );
        assert_eq!(
            first_difference(&b, &a),
            Some((
                "0.yaml".into(),
                "extra file 0.yaml: in the image, not in the commit".into()
            ))
        );
    }
}
