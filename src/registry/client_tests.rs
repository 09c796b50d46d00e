//! The registry client's calls against real registries (once part of
//! tests/provenance.rs): distribution 2.8 (no referrers API, mounts),
//! go-containerregistry's registry (the referrers API, no mounts) and a
//! loopback stub for what none of them shows (`OCI-Subject`, a paged tag
//! list). Digests are coreutils' sha256sum's.

use crate::testkit as common;

use common::oci::ReferrersRegistry;
use common::registry::{Auth, Registry};
use common::sha256_digest as sha256;
use common::subject_stub::SubjectStub;
use serde_json::Value;

const IN_TOTO: &str = "application/vnd.in-toto+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const EMPTY_DIGEST: &str =
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";

fn client(repository: &str) -> crate::registry::Client {
    crate::registry::Client::open(&crate::registry::Options {
        repository: repository.to_string(),
        insecure: false,
        monolithic: false,
        credentials: None,
        docker_config: None,
        login: None,
    })
    .unwrap()
}

fn artifact(kind: &str, body: &[u8], rev: &str) -> crate::image::artifact::Artifact {
    crate::image::artifact::Artifact {
        artifact_type: kind.to_string(),
        layers: vec![(kind.to_string(), body.to_vec())],
        annotations: [(
            "org.opencontainers.image.revision".to_string(),
            rev.to_string(),
        )]
        .into_iter()
        .collect(),
        title: None,
    }
}

/// What a registry does, as [`exercise_client`] expects it.
struct Shows {
    /// It answers `GET referrers/DIGEST`.
    referrers_api: bool,
    /// It answers a manifest `PUT` with a subject with `OCI-Subject`.
    oci_subject: bool,
    /// It mounts a blob from another repository (distribution does;
    /// go-containerregistry's registry answers every mount with an upload).
    mounts: bool,
}

/// Exercises every client call on a registry that does what `shows` says.
fn exercise_client(host: &str, shows: Shows) {
    use crate::image::Descriptor;
    let c = client(&format!("{host}/team/a"));
    assert_eq!(c.list_tags().unwrap(), Vec::<String>::new());
    assert_eq!(c.head_manifest("nope").unwrap(), None);
    assert!(c.get_manifest("nope").unwrap().is_none());

    // Blobs: put (twice: the second is a no-op), get, mount elsewhere.
    let config = c
        .put_blob("application/vnd.oci.empty.v1+json", b"{}")
        .unwrap();
    assert_eq!(config.digest, EMPTY_DIGEST);
    let layer_bytes = b"layer bytes".to_vec();
    let layer = c
        .put_blob("application/octet-stream", &layer_bytes)
        .unwrap();
    let before = c.requests();
    c.put_blob("application/octet-stream", &layer_bytes)
        .unwrap();
    if shows.mounts {
        assert_eq!(
            c.requests() - before,
            1,
            "a present blob costs one request (a mount from this repository)"
        );
    }
    assert_eq!(c.get_blob(&layer.digest).unwrap(), layer_bytes);
    let other = client(&format!("{host}/team/b"));
    assert_eq!(
        other.mount_blob(&layer.digest, "team/a").unwrap(),
        shows.mounts
    );
    assert_eq!(other.get_blob(&layer.digest).unwrap(), layer_bytes);
    let missing = format!("sha256:{}", "0".repeat(64));
    assert!(!other.mount_blob(&missing, "team/a").unwrap());

    // Manifests under tags, listed across pages.
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY_DIGEST, "size": 2},
        "layers": [{"mediaType": "application/octet-stream", "digest": layer.digest, "size": layer.size}],
    }))
    .unwrap();
    for t in ["t1", "t2", "t3", "t4", "t5"] {
        let put = c.put_manifest(t, &manifest, MANIFEST).unwrap();
        assert_eq!(put.digest, sha256(&manifest));
        assert_eq!(put.subject, None);
    }
    let mut tags = c.list_tags().unwrap();
    tags.sort();
    assert_eq!(tags, ["t1", "t2", "t3", "t4", "t5"]);
    let head = c.head_manifest("t3").unwrap().unwrap();
    assert_eq!(head.digest, sha256(&manifest));
    assert_eq!(head.size, manifest.len() as u64);
    assert_eq!(head.media_type, MANIFEST);
    let got = c.get_manifest(&head.digest).unwrap().unwrap();
    assert_eq!(got.bytes, manifest);
    assert_eq!(got.media_type, MANIFEST);

    // Referrers: two kinds on one subject, one on another; re-attaching the
    // same artifact lists it once.
    let subject = Descriptor::of(MANIFEST, &manifest);
    assert_eq!(c.referrers(&subject.digest, None).unwrap(), vec![]);
    let promo = "application/vnd.settings-image.promotion.v1+json";
    let p1 = c
        .attach_referrer(&subject, &artifact(IN_TOTO, b"{\"a\":1}", "r1"))
        .unwrap();
    let p2 = c
        .attach_referrer(&subject, &artifact(promo, b"{\"b\":2}", "r1"))
        .unwrap();
    let p3 = c
        .attach_referrer(&subject, &artifact(IN_TOTO, b"{\"a\":1}", "r1"))
        .unwrap();
    assert_eq!(p3.descriptor, p1.descriptor);
    let tag = subject.digest.replace(':', "-");
    let expected_tag = (!shows.oci_subject).then(|| tag.clone());
    assert_eq!(p1.referrers_tag, expected_tag);
    let all = c.referrers(&subject.digest, None).unwrap();
    assert_eq!(c.has_referrers_api(), Some(shows.referrers_api));
    assert_eq!(all.len(), 2, "{all:?}");
    for d in [&p1.descriptor, &p2.descriptor] {
        let listed = all.iter().find(|x| x.digest == d.digest).expect("listed");
        assert_eq!(listed.artifact_type, d.artifact_type);
        assert_eq!(
            listed.annotations["org.opencontainers.image.revision"],
            "r1"
        );
        assert_eq!(listed.size, d.size);
    }
    let only = c.referrers(&subject.digest, Some(promo)).unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].digest, p2.descriptor.digest);
    let m = c.get_manifest(&p2.descriptor.digest).unwrap().unwrap();
    let v: Value = serde_json::from_slice(&m.bytes).unwrap();
    assert_eq!(v["subject"]["digest"], subject.digest.as_str());
    assert_eq!(v["artifactType"], promo);
    let tags = c.list_tags().unwrap();
    assert_eq!(tags.contains(&tag), !shows.oci_subject, "{tags:?}");
}

#[test]
fn the_client_api_on_distribution() {
    let reg = Registry::start(Auth::None);
    exercise_client(
        &reg.host(),
        Shows {
            referrers_api: false,
            oci_subject: false,
            mounts: true,
        },
    );
}

/// go-containerregistry's registry: the referrers API (listing each
/// referrer's config media type as its artifactType: the client reads the
/// manifests), no `OCI-Subject` (so the referrers tag too), no mounts.
#[test]
fn the_client_api_on_a_real_referrers_api_registry() {
    let reg = ReferrersRegistry::start();
    exercise_client(
        &reg.host,
        Shows {
            referrers_api: true,
            oci_subject: false,
            mounts: false,
        },
    );
    assert!(
        reg.requests()
            .iter()
            .any(|l| l.starts_with("GET /v2/team/a/referrers/sha256:")),
        "{:?}",
        reg.requests()
    );
}

/// The stub, for what no registry here shows: `OCI-Subject` (no referrers
/// tag), the registry's own `artifactType` filter and a tag list paged by
/// `Link`.
#[test]
fn the_client_api_on_a_registry_that_answers_oci_subject() {
    let stub = SubjectStub::start();
    exercise_client(
        &stub.host(),
        Shows {
            referrers_api: true,
            oci_subject: true,
            mounts: true,
        },
    );
    // The tag list took more than one page.
    assert!(
        stub.log()
            .iter()
            .any(|l| l.contains("/tags/list?n=2&last=")),
        "{:?}",
        stub.log()
    );
}
