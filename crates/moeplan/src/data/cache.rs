//! Caches kept beside data: derived tables a workload or trace holds and
//! shares with its clones. A cache is not data: two values are equal
//! whatever their caches hold, and a poisoned lock (a thread that panicked
//! between pushes) still holds only finished entries.

use std::sync::{Arc, Mutex, MutexGuard};

/// A list of cached entries shared by every clone of its owner.
pub(crate) struct Shared<T>(Arc<Mutex<Vec<T>>>);

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Shared(Arc::default())
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T> Shared<T> {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<T>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T> PartialEq for Shared<T> {
    fn eq(&self, _: &Shared<T>) -> bool {
        true
    }
}

impl<T> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cache")
    }
}

/// Per key (a GPU count, with options) and layer, a value once computed:
/// at most `KEEP` keys, the one used least recently dropped first.
pub(crate) struct PerLayer<K, T, const KEEP: usize>(Mutex<Vec<Keyed<K, T>>>);

/// One key's values, each layer's once computed.
type Keyed<K, T> = (K, Vec<Option<Arc<T>>>);

impl<K, T, const KEEP: usize> Default for PerLayer<K, T, KEEP> {
    fn default() -> Self {
        PerLayer(Mutex::default())
    }
}

impl<K: PartialEq + Clone, T, const KEEP: usize> PerLayer<K, T, KEEP> {
    fn lock(&self) -> MutexGuard<'_, Vec<Keyed<K, T>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Layer `l`'s value under `key`, if kept.
    pub(crate) fn get(&self, key: &K, l: usize) -> Option<Arc<T>> {
        let kept = self.lock();
        let (_, layers) = kept.iter().find(|(k, _)| k == key)?;
        layers.get(l).cloned().flatten()
    }

    /// Keeps `value` as layer `l`'s under `key` (of `layers` layers).
    pub(crate) fn put(&self, key: &K, layers: usize, l: usize, value: Arc<T>) {
        let mut kept = self.lock();
        let mut entry = match kept.iter().position(|(k, _)| k == key) {
            Some(i) => kept.remove(i),
            None => (key.clone(), vec![None; layers]),
        };
        if let Some(slot) = entry.1.get_mut(l) {
            *slot = Some(value);
        }
        if kept.len() >= KEEP {
            kept.remove(0);
        }
        kept.push(entry);
    }

    /// Keys kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
