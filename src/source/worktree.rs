//! Reads the settings folder as it is on disk.

use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{Content, Entries, EntryKind, Source, check_symlink_chains, check_symlink_target};
use crate::error::{Error, Result};
use crate::field::Field;

/// Reads `root` recursively. `.git` is skipped at every level; symlinks
/// that are absolute or leave the folder, fifos, sockets, devices and
/// non-UTF-8 names are errors naming the path; hard links are read as the
/// regular files they are. An empty or missing folder is an error.
pub fn read(root: &Path) -> Result<Source> {
    let meta = fs::metadata(root).map_err(|e| Error::Source {
        path: root.to_path_buf(),
        message: format!("cannot read the settings folder: {e}").into(),
        hint: Some(crate::text![
            Field::Path,
            " must name an existing directory"
        ]),
    })?;
    if !meta.is_dir() {
        return Err(Error::Source {
            path: root.to_path_buf(),
            message: "is not a directory".into(),
            hint: Some(crate::text![
                Field::Path,
                " must name the folder that holds the settings files"
            ]),
        });
    }
    let mut entries = Entries::new();
    walk(root, &mut entries)?;
    entries.sort();
    check_symlink_chains(&entries).map_err(|(link, message)| Error::Source {
        path: root.join(&link),
        message: message.into(),
        hint: Some(format!(
            "replace the link with a copy of the file, or point it inside {} without going through another link",
            root.display()
        ).into()),
    })?;
    if entries.iter().all(|e| matches!(e.kind, EntryKind::Dir)) {
        return Err(Error::Source {
            path: root.to_path_buf(),
            message: "the settings folder holds no files".into(),
            hint: Some(
                "an empty image would mount as an empty directory; add the settings files first"
                    .into(),
            ),
        });
    }
    Ok(Source {
        root: root.to_path_buf(),
        entries,
        objects: None,
    })
}

/// Lists `root` into `out`, depth first in `read_dir`'s order: a stack of
/// the directories being read, not recursion, and at most
/// [`super::MAX_DEPTH`] levels.
fn walk(root: &Path, out: &mut Entries) -> Result<()> {
    let open = |dir: &Path| {
        fs::read_dir(dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))
    };
    let mut stack = vec![(root.to_path_buf(), String::new(), open(root)?)];
    while let Some((dir, rel, rd)) = stack.last_mut() {
        let Some(item) = rd.next() else {
            stack.pop();
            continue;
        };
        let item = item.map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        let full: PathBuf = item.path();
        let name = item.file_name();
        let Some(name) = name.to_str() else {
            return Err(Error::Source {
                path: full,
                message: "the name is not valid UTF-8".into(),
                hint: Some("rename the file; image layers and Kubernetes need UTF-8 paths".into()),
            });
        };
        if name == ".git" {
            continue;
        }
        let path = if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        };
        super::check_depth(root, &path, stack.len(), None)?;
        let meta = fs::symlink_metadata(&full)
            .map_err(|e| Error::io(format!("reading {}", full.display()), e))?;
        let ft = meta.file_type();
        if ft.is_dir() {
            out.push_dir(&path)?;
            let rd = open(&full)?;
            stack.push((full, path, rd));
        } else if ft.is_file() {
            // Read again at root/path when packaged: no path kept per file.
            out.push_file(
                &path,
                meta.len(),
                meta.permissions().mode() & 0o111 != 0,
                Content::Disk,
            )?;
        } else if ft.is_symlink() {
            let target = fs::read_link(&full)
                .map_err(|e| Error::io(format!("reading link {}", full.display()), e))?;
            let Some(target) = target.to_str().map(str::to_string) else {
                return Err(Error::Source {
                    path: full,
                    message: "the symlink target is not valid UTF-8".into(),
                    hint: Some(
                        "point the link at a UTF-8 name; image layers and Kubernetes need UTF-8 paths"
                            .into(),
                    ),
                });
            };
            check_symlink_target(&path, &target).map_err(|m| Error::Source {
                path: full.clone(),
                message: m.into(),
                hint: Some(
                    format!(
                        "replace the link with a copy of the file, or point it inside {}",
                        root.display()
                    )
                    .into(),
                ),
            })?;
            out.push_symlink(&path, &target)?;
        } else {
            let what = if ft.is_fifo() {
                "a fifo"
            } else if ft.is_socket() {
                "a socket"
            } else if ft.is_block_device() || ft.is_char_device() {
                "a device"
            } else {
                "not a regular file"
            };
            return Err(Error::Source {
                path: full,
                message: format!(
                    "is {what}; a settings image holds only files, directories and symlinks"
                )
                .into(),
                hint: Some("remove it from the settings folder".into()),
            });
        }
    }
    Ok(())
}
