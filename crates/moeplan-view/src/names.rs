//! The closest known name to a misspelt one, for the messages the JS API
//! and the docs embed give in their callers' names ("did you mean
//! `replicasPerGpu`?").

/// The name of `known` closest to `word`: equal but for ASCII case, a prefix of
/// three letters or more, or within a third of its length in edits
/// (optimal string alignment: Levenshtein with adjacent transpositions); `None` when nothing is close.
///
/// ```
/// use moeplan_view::closest;
/// let known = ["nodes", "gpusPerNode", "replicasPerGpu", "redundantExperts"];
/// assert_eq!(closest("replicasPerGPU", known), Some("replicasPerGpu"));
/// assert_eq!(closest("gpusPerNodes", known), Some("gpusPerNode"));
/// assert_eq!(closest("gpus", known), Some("gpusPerNode"));
/// assert_eq!(closest("seed", known), None);
/// ```
pub fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    // ASCII case only: the names compared are, and Unicode's case tables
    // would weigh several KB in the page's main thread.
    let w = word.to_ascii_lowercase();
    let allowed = (w.chars().count() / 3).max(1);
    known
        .into_iter()
        .filter_map(|k| {
            let lower = k.to_ascii_lowercase();
            let d = strsim::osa_distance(&w, &lower);
            let prefix = w.chars().count() >= 3 && lower.starts_with(&w);
            (d <= allowed || prefix).then_some((d, k))
        })
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k)
}
