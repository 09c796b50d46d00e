//! Unit tests of the mirror's intake (`history/mirror/intake.rs`), kept apart
//! so the module itself stays under 700 lines.

use super::*;
use std::process::Command;

/// A pack entry: `header` and `data` zlib-compressed.
fn entry(header: Header, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    header.write_to(data.len() as u64, &mut out).unwrap();
    out.extend(miniz_oxide::deflate::compress_to_vec_zlib(data, 1));
    out
}

/// A delta from a base of `base_len` bytes: copy `len` bytes at 0 (one
/// byte each), then insert `tail`.
fn delta(base_len: usize, len: u8, tail: &[u8]) -> Vec<u8> {
    let varint = |mut n: usize, out: &mut Vec<u8>| loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    };
    let mut d = Vec::new();
    varint(base_len, &mut d);
    varint(usize::from(len) + tail.len(), &mut d);
    d.extend([0x91, 0, len, u8::try_from(tail.len()).unwrap()]);
    d.extend(tail);
    d
}

fn git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
    use std::io::Write as _;
    let mut c = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = c.stdin.take().unwrap();
    let data = stdin.unwrap_or_default().to_vec();
    let writer = std::thread::spawn(move || input.write_all(&data));
    let out = c.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "git {args:?}");
    out.stdout
}

#[test]
fn a_large_object_between_a_delta_and_its_base_is_taken_out_and_the_rest_rebased() {
    // [small S][large L][delta of S][delta of L]: L goes into a pack of
    // its own; the delta of S gets a new distance (L no longer lies
    // between them), the delta of L names it by id. git reads both
    // packs and every object is what git hashes from the content.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m.git");
    crate::history::mirror::store::init_bare(&dir, "http://x/y", "main").unwrap();
    let small: Vec<u8> = (0..200u32).map(|i| b'a' + (i % 26) as u8).collect();
    let large = vec![7u8; BIG as usize + 10];
    let d_small = delta(small.len(), 50, b"-small");
    let d_large = delta(large.len(), 100, b"-large");
    let mut pack = pack::data::header::encode(pack::data::Version::V2, 4).to_vec();
    let at_small = pack.len() as u64;
    pack.extend(entry(Header::Blob, &small));
    let at_large = pack.len() as u64;
    pack.extend(entry(Header::Blob, &large));
    let at = pack.len() as u64;
    pack.extend(entry(
        Header::OfsDelta {
            base_distance: at - at_small,
        },
        &d_small,
    ));
    let at = pack.len() as u64;
    pack.extend(entry(
        Header::OfsDelta {
            base_distance: at - at_large,
        },
        &d_large,
    ));
    let mut sha = gix::hash::hasher(gix::hash::Kind::Sha1);
    sha.update(&pack);
    pack.extend(sha.try_finalize().unwrap().as_slice());
    let opts = gix::open::Options::isolated().with(gix::sec::Trust::Full);
    let repo = gix::open_opts(&dir, opts).unwrap();
    let taken = take(
        &mut &pack[..],
        &repo,
        &Limits::default(),
        &AtomicBool::new(false),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((taken.objects, taken.bytes), (4, pack.len() as u64));
    let mut contents = vec![small.clone(), large.clone()];
    contents.push([&small[..50], b"-small"].concat());
    contents.push([&large[..100], b"-large"].concat());
    for c in &contents {
        let id = git(&dir, &["hash-object", "-t", "blob", "--stdin"], Some(c));
        let id = String::from_utf8_lossy(&id).trim().to_string();
        assert_eq!(&git(&dir, &["cat-file", "blob", &id], None), c, "{id}");
    }
    git(&dir, &["fsck", "--full", "--strict"], None);
    let packs: Vec<_> = std::fs::read_dir(dir.join("objects/pack"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    assert_eq!(packs.len(), 2, "{packs:?}");
    for p in packs {
        git(&dir, &["verify-pack", p.to_str().unwrap()], None);
    }
}
