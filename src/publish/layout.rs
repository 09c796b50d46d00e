//! The OCI image layout writer: `oci-layout`, `index.json` (one entry per
//! tag, named by `org.opencontainers.image.ref.name`) and
//! `blobs/sha256/<hex>`. Blobs and `index.json` are written to temporary
//! files and renamed into place, so a failure leaves no partial file and no
//! new index entry.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::image::{ANNOTATION_REF_NAME, INDEX_MEDIA_TYPE, Image};
use crate::tag::is_timestamp_tag;

const LAYOUT_FILE: &str = "oci-layout";
const LAYOUT_CONTENT: &str = "{\"imageLayoutVersion\":\"1.0.0\"}";

/// What writing to a layout did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutWrite {
    /// Blobs (layer, config, manifest) that were not there before.
    pub new_blobs: usize,
    /// Whether `index.json` changed.
    pub index_changed: bool,
}

/// Writes `image` into the layout at `root` under each of `tags` (or untagged
/// when `tags` is empty). Creates the layout when `root` is missing or an
/// empty directory. A timestamp tag that already names another digest is
/// refused before anything is written; other tags move to the new image.
pub fn write(root: &Path, image: &Image, tags: &[String]) -> Result<LayoutWrite> {
    let created = outermost_missing(root);
    let result = lock(root).and_then(|_lock| write_inner(root, image, tags));
    if let (Err(_), Some(dir)) = (&result, created) {
        // Leave nothing half-made behind: remove what we made, missing
        // parents of the layout included.
        let _ = fs::remove_dir_all(dir);
    }
    result
}

/// Creates `root` if needed and takes an exclusive lock on it (`flock` on
/// the directory), held until the returned file is dropped: concurrent
/// builds into one layout then update `index.json` one after the other
/// instead of losing each other's entries.
fn lock(root: &Path) -> Result<fs::File> {
    if root.exists() && !root.is_dir() {
        return Err(layout_err(root, "exists and is not a directory"));
    }
    fs::create_dir_all(root).map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
    let dir =
        fs::File::open(root).map_err(|e| Error::io(format!("opening {}", root.display()), e))?;
    dir.lock()
        .map_err(|e| Error::io(format!("locking {}", root.display()), e))?;
    Ok(dir)
}

/// The outermost of `path` and its ancestors that does not exist yet: what
/// creating `path` makes, and what to remove if the write fails.
fn outermost_missing(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && fs::symlink_metadata(p).is_err())
        .last()
        .map(Path::to_path_buf)
}

/// Refuses a layout directory inside the settings folder `folder`: the next
/// build would package the layout itself. A missing folder passes (the
/// source reader reports it).
pub fn check_outside(output: &Path, folder: &Path) -> Result<()> {
    let Ok(folder) = fs::canonicalize(folder) else {
        return Ok(());
    };
    let out =
        resolve(output).map_err(|e| Error::io(format!("resolving {}", output.display()), e))?;
    if out.starts_with(&folder) {
        return Err(Error::input(
            crate::text![
                crate::field::Field::Output,
                format!(
                    " {} is inside the settings folder {}",
                    output.display(),
                    folder.display()
                )
            ],
            Some(
                "write the layout outside the settings folder, or the next build would package it"
                    .to_string(),
            ),
        ));
    }
    Ok(())
}

/// `path` made absolute with its longest existing ancestor canonicalized
/// (symlinks resolved) and the missing rest applied lexically.
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    use std::path::Component;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let parts: Vec<Component> = abs.components().collect();
    for split in (1..=parts.len()).rev() {
        let base: PathBuf = parts[..split].iter().collect();
        if let Ok(mut resolved) = fs::canonicalize(&base) {
            for part in &parts[split..] {
                match part {
                    Component::ParentDir => {
                        resolved.pop();
                    }
                    Component::Normal(name) => resolved.push(name),
                    _ => {}
                }
            }
            return Ok(resolved);
        }
    }
    Ok(abs)
}

fn layout_err(root: &Path, message: impl Into<String>) -> Error {
    Error::Layout {
        path: root.to_path_buf(),
        message: message.into(),
    }
}

fn read_index(root: &Path) -> Result<Option<Value>> {
    let layout = root.join(LAYOUT_FILE);
    if !root.exists() {
        return Ok(None);
    }
    if !root.is_dir() {
        return Err(layout_err(root, "exists and is not a directory"));
    }
    if !layout.exists() {
        let mut items =
            fs::read_dir(root).map_err(|e| Error::io(format!("reading {}", root.display()), e))?;
        if items.next().is_some() {
            return Err(layout_err(
                root,
                "is a non-empty directory without an oci-layout file",
            ));
        }
        return Ok(None);
    }
    let text = fs::read_to_string(&layout)
        .map_err(|e| Error::io(format!("reading {}", layout.display()), e))?;
    let version: Value = serde_json::from_str(&text)
        .map_err(|e| layout_err(root, format!("oci-layout is not JSON: {e}")))?;
    if version.get("imageLayoutVersion").and_then(Value::as_str) != Some("1.0.0") {
        return Err(layout_err(
            root,
            "oci-layout is not imageLayoutVersion 1.0.0",
        ));
    }
    let index_path = root.join("index.json");
    let text = fs::read_to_string(&index_path)
        .map_err(|e| Error::io(format!("reading {}", index_path.display()), e))?;
    let index: Value = serde_json::from_str(&text)
        .map_err(|e| layout_err(root, format!("index.json is not JSON: {e}")))?;
    if !index.get("manifests").is_some_and(Value::is_array) {
        return Err(layout_err(root, "index.json has no manifests array"));
    }
    Ok(Some(index))
}

fn write_inner(root: &Path, image: &Image, tags: &[String]) -> Result<LayoutWrite> {
    let existing = read_index(root)?;
    let mut index = existing.clone().unwrap_or_else(
        || json!({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": []}),
    );
    let manifests = index
        .get_mut("manifests")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| layout_err(root, "index.json has no manifests array"))?;

    // Decide every index change before touching the disk.
    let digest_of = |m: &Value| m.get("digest").and_then(Value::as_str).map(str::to_string);
    let ref_of = |m: &Value| {
        m.get("annotations")
            .and_then(|a| a.get(ANNOTATION_REF_NAME))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    for tag in tags {
        if let Some(old) = manifests
            .iter()
            .find(|m| ref_of(m).as_deref() == Some(tag.as_str()))
        {
            let old_digest = digest_of(old).unwrap_or_default();
            if old_digest != image.digest && is_timestamp_tag(tag) {
                return Err(Error::TagExists {
                    tag: tag.clone(),
                    existing: old_digest,
                    new: image.digest.clone(),
                });
            }
        }
    }
    let descriptor = image.manifest_descriptor();
    let entry = |tag: Option<&String>| {
        let mut d = serde_json::to_value(&descriptor).unwrap_or(Value::Null);
        if let (Some(tag), Some(obj)) = (tag, d.as_object_mut()) {
            let mut ann = BTreeMap::new();
            ann.insert(ANNOTATION_REF_NAME.to_string(), tag.clone());
            obj.insert("annotations".into(), json!(ann));
        }
        d
    };
    if tags.is_empty() {
        if !manifests
            .iter()
            .any(|m| digest_of(m).as_deref() == Some(image.digest.as_str()))
        {
            manifests.push(entry(None));
        }
    } else {
        for tag in tags {
            let wanted = entry(Some(tag));
            match manifests
                .iter()
                .position(|m| ref_of(m).as_deref() == Some(tag.as_str()))
            {
                Some(i) => manifests[i] = wanted,
                None => manifests.push(wanted),
            }
        }
    }
    let index_changed = existing.as_ref() != Some(&index);

    let blobs = root.join("blobs").join("sha256");
    fs::create_dir_all(&blobs)
        .map_err(|e| Error::io(format!("creating {}", blobs.display()), e))?;
    let layout = root.join(LAYOUT_FILE);
    if !layout.exists() {
        write_atomic(root, &layout, LAYOUT_CONTENT.as_bytes())?;
    }
    let mut new_blobs = 0;
    if put_layer(&blobs, image)? {
        new_blobs += 1;
    }
    for (digest, bytes) in [
        (&image.config_descriptor.digest, &image.config),
        (&image.digest, &image.manifest),
    ] {
        let path = blob_path(&blobs, digest);
        if !path.exists() {
            write_atomic(&blobs, &path, bytes)?;
            new_blobs += 1;
        }
    }
    if index_changed {
        let mut bytes = serde_json::to_vec(&index).map_err(|e| layout_err(root, e.to_string()))?;
        bytes.push(b'\n');
        write_atomic(root, &root.join("index.json"), &bytes)?;
    }
    Ok(LayoutWrite {
        new_blobs,
        index_changed,
    })
}

fn blob_path(blobs: &Path, digest: &str) -> PathBuf {
    blobs.join(digest.trim_start_matches("sha256:"))
}

fn put_layer(blobs: &Path, image: &Image) -> Result<bool> {
    let path = blob_path(blobs, &image.layer.digest);
    if path.exists() {
        return Ok(false);
    }
    // The built layer is a temporary file; when it is on the layout's file
    // system, a hard link puts it in place without copying it (the temporary
    // name goes away when the image is dropped). Elsewhere, copy it.
    let built = image.layer.file.as_file();
    let linked = built
        .sync_all()
        .and_then(|_| {
            use std::os::unix::fs::PermissionsExt;
            built.set_permissions(fs::Permissions::from_mode(0o644))
        })
        .and_then(|_| fs::hard_link(image.layer.file.path(), &path));
    if linked.is_ok() {
        sync_dir(blobs)?;
        return Ok(true);
    }
    let tmp = tempfile::NamedTempFile::new_in(blobs)
        .map_err(|e| Error::io(format!("writing into {}", blobs.display()), e))?;
    let mut src = fs::File::open(image.layer.file.path())
        .map_err(|e| Error::io("reopening the built layer", e))?;
    let mut dst = tmp.as_file();
    std::io::copy(&mut src, &mut dst)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    dst.sync_all()
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    persist(tmp, &path)?;
    Ok(true)
}

/// Makes a new name in `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))
}

fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::io(format!("writing into {}", dir.display()), e))?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    persist(tmp, path)
}

fn persist(tmp: tempfile::NamedTempFile, path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let _ = fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o644));
    tmp.persist(path)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_removes_every_directory_it_created() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir(&src).unwrap();
        fs::write(src.join("a.yaml"), "a: 1\n").unwrap();
        let source = crate::source::worktree::read(&src).unwrap();
        let image = crate::image::build(&source, &Default::default()).unwrap();
        // Without its built layer file, putting the layer in place fails
        // after the layout's directories were made.
        fs::remove_file(image.layer.file.path()).unwrap();
        let out = tmp.path().join("new/deeper/layout");
        assert!(write(&out, &image, &["dev".to_string()]).is_err());
        assert!(!tmp.path().join("new").exists(), "new/ was left behind");
    }
}
