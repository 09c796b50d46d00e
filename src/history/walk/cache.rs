//! The walk's bounded cache of what it read from trees, by object id.

use gix::ObjectId;
use gix::hashtable::HashMap;

/// Two generations of a map: when the current one is full it becomes the
/// old one and the older is dropped, so memory stays bounded while recent
/// entries (the ones a walk meets again) survive.
pub(super) struct Cache<V> {
    cur: HashMap<ObjectId, V>,
    old: HashMap<ObjectId, V>,
}

/// Entries per trie node kept before the oldest generation is dropped.
const CACHE_LIMIT: usize = 1 << 15;

impl<V> Cache<V> {
    pub(super) fn new() -> Self {
        Cache {
            cur: HashMap::default(),
            old: HashMap::default(),
        }
    }

    pub(super) fn get(&mut self, id: &ObjectId) -> Option<&V> {
        if !self.cur.contains_key(id) {
            let v = self.old.remove(id)?;
            self.insert(*id, v);
        }
        self.cur.get(id)
    }

    pub(super) fn insert(&mut self, id: ObjectId, v: V) {
        if self.cur.len() >= CACHE_LIMIT {
            self.old = std::mem::take(&mut self.cur);
        }
        self.cur.insert(id, v);
    }
}
