//! The studies beside the plans: serving with re-planning and the
//! cross-workload matrix, asked for and asked again when the plans change.

use super::*;

impl Ctx {
    /// Asks for serving with re-planning at the settings' interval and
    /// window; `sweep`: the curve over intervals too (a new window, trace,
    /// cluster, rule or hardware; an interval change leaves it).
    pub(in crate::ui) fn ask_serving(self, sweep: bool) {
        let s = self.settings.get_untracked();
        let ask = ServingAsk {
            every: s.every,
            window: s.window,
            sweep,
            engine: (!s.engine.is_empty()).then(|| s.engine.clone()),
            tokens_per_pass: (s.tokens_per_pass > 0).then_some(s.tokens_per_pass),
        };
        self.send_with(
            RequestKind::Serving,
            None,
            None,
            None,
            None,
            Some(Study::Serving(ask)),
        );
    }

    /// The replay again once the plans it stands beside changed, when shown.
    pub(in crate::ui) fn refresh_serving(self) {
        if self.settings.with_untracked(|s| s.serve) {
            self.ask_serving(true);
        }
    }

    /// Reads the files the user chose to judge plans across and sends them
    /// to the worker, one after another in one buffer.
    pub(in crate::ui) fn load_cross(self, files: Vec<web_sys::File>) {
        let total: f64 = files.iter().map(|f| f.size()).sum();
        if let Some(message) = too_large("these files together", total) {
            self.status.set(Status::Error(message));
            return;
        }
        self.status
            .set(Status::Busy(format!("reading {} files", files.len())));
        wasm_bindgen_futures::spawn_local(async move {
            let mut names = Vec::with_capacity(files.len());
            let mut sizes = Vec::with_capacity(files.len());
            let mut parts = Vec::with_capacity(files.len());
            for file in &files {
                let Ok(buf) = wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await
                else {
                    self.status.set(Status::Error(format!(
                        "{}: the browser could not read the file",
                        file.name()
                    )));
                    return;
                };
                let part = js_sys::Uint8Array::new(&buf);
                names.push(file.name());
                sizes.push(part.length() as usize);
                parts.push(part);
            }
            let all = js_sys::Uint8Array::new_with_length(sizes.iter().sum::<usize>() as u32);
            let mut at = 0u32;
            for part in &parts {
                all.set(part, at);
                at += part.length();
            }
            let ask = CrossAsk { names, sizes };
            self.send_with(
                RequestKind::Cross,
                None,
                None,
                None,
                Some(all),
                Some(Study::Cross(ask)),
            );
        });
    }

    /// Judges the traces the worker holds for the matrix again (the cluster
    /// changed), when a matrix is shown.
    pub(in crate::ui) fn refresh_cross(self) {
        if self.board.cross.with_untracked(Option::is_some) {
            let again = CrossAsk {
                names: Vec::new(),
                sizes: Vec::new(),
            };
            self.send_with(
                RequestKind::Cross,
                None,
                None,
                None,
                None,
                Some(Study::Cross(again)),
            );
        }
    }
}
