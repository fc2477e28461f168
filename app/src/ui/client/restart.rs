//! When the worker dies or the person cancels: say what was lost, start a
//! fresh worker and send it the last trace and cluster the old one accepted.

use super::*;

impl Ctx {
    /// Stops the work in progress (the Cancel beside the progress bar): the
    /// worker cannot be interrupted mid-computation, so it is replaced, as a
    /// worker that died is, by a fresh one given the last trace it accepted
    /// — the previous trace, cluster and plans, said as information.
    pub(in crate::ui) fn cancel(self) {
        if self.status.with_untracked(|s| matches!(s, Status::Busy(_))) {
            self.died(self.generation(), Cause::Cancelled);
        }
    }

    /// Worker number `generation` is gone: say so, start a fresh one, and
    /// send it the last trace the old one accepted.
    pub(in crate::ui) fn died(self, generation: u32, cause: Cause) {
        let cancelled = matches!(cause, Cause::Cancelled);
        let Some((was_ready, restoring, looping)) = self
            .conn
            .try_update_value(|c| {
                if c.generation != generation {
                    return None;
                }
                let worker = c.worker.take()?;
                worker.terminate();
                let t = now();
                c.deaths.retain(|&d| t - d < CRASH_WINDOW_MS);
                if !cancelled {
                    c.deaths.push(t);
                }
                let looping = c.deaths.len() >= CRASH_CAP;
                if looping {
                    c.deaths.clear();
                }
                for t in [c.watchdog.take().map(|w| w.1), c.start_timer.take()]
                    .into_iter()
                    .flatten()
                {
                    clear_timer(t);
                }
                c.queue.clear();
                c.hold = false;
                Some((c.ready, c.restoring.take(), looping))
            })
            .flatten()
        else {
            return;
        };
        let reason = cause.describe();
        if !was_ready && restoring.is_none() {
            self.status.set(Status::Error(format!(
                "the planning worker could not start ({reason}); reload the page"
            )));
            return;
        }
        // Whatever it had not answered is lost; say what it was doing.
        let lost: Vec<Pending> = self
            .pending
            .try_update_value(|p| p.drain().map(|(_, v)| v).collect())
            .unwrap_or_default();
        let doing = lost
            .iter()
            .find_map(|p| match &p.source {
                Some(ResendableSource::File(name, _)) => Some(format!(" while reading {name}")),
                _ => None,
            })
            .or_else(|| {
                lost.iter()
                    .any(|p| p.source.is_some() || p.cluster.is_some())
                    .then(|| " while planning".to_string())
            })
            .unwrap_or_default();
        self.restarts.update(|n| *n += 1);
        self.start_worker();
        if let Some(r) = restoring {
            // The trace that was to be restored killed the fresh worker too:
            // do not try it a third time.
            self.good.set_value(LastAccepted::default());
            self.status.set(Status::Error(format!(
                "the planning worker stopped again while restoring {} ({reason}); \
                 restarted it without a trace — load a file or press Generate",
                r.what
            )));
            return;
        }
        if looping {
            self.good.set_value(LastAccepted::default());
            self.status.set(Status::Error(format!(
                "the planning worker stopped{doing} ({reason}), {CRASH_CAP} times within a \
                 minute; restarted it without a trace — load a file or press Generate"
            )));
            return;
        }
        let head = if cancelled {
            format!("cancelled{doing}")
        } else {
            format!("the planning worker stopped{doing} ({reason})")
        };
        let good = self.good.get_value();
        let Some(kept) = good.source else {
            self.status.set(Status::Error(format!(
                "{head}; restarted it without a trace — load a file or press Generate"
            )));
            return;
        };
        let cluster = good
            .cluster
            .unwrap_or_else(|| cluster_of(&self.settings.get_untracked()));
        // The fields show the cluster the restored plan is for.
        if cluster != cluster_of(&self.settings.get_untracked()) {
            self.settings.update(|s| {
                s.nodes = cluster.nodes;
                s.gpus_per_node = cluster.gpus_per_node;
                s.groups = cluster.groups;
            });
        }
        // A cancelled generation leaves the fields at what was asked: they
        // go back to the trace shown.
        if let ResendableSource::Generated(Source::Generate {
            preset,
            batches,
            seed,
            routes,
        }) = &kept
        {
            let same = self.settings.with_untracked(|s| {
                (&s.preset, s.batches, s.seed, s.routes) == (preset, *batches, *seed, *routes)
            });
            if !same {
                self.settings.update(|s| {
                    s.preset = preset.clone();
                    s.batches = *batches;
                    s.seed = *seed;
                    s.routes = *routes;
                });
            }
        }
        let what = match &kept {
            ResendableSource::File(name, _) => name.clone(),
            ResendableSource::Generated(_) => "the generated trace".into(),
        };
        self.status.set(if cancelled {
            Status::Info(format!("{head}; bringing the previous trace back…"))
        } else {
            Status::Error(format!("{head}; restarting it with the previous trace…"))
        });
        self.conn.update_value(|c| {
            c.restoring = Some(Restoring {
                id: None,
                what,
                head: head.clone(),
                cancelled,
            });
        });
        match kept {
            ResendableSource::Generated(_) => self.send_restore(kept, cluster, None),
            ResendableSource::File(name, file) => {
                // Its bytes went to the old worker: read the file again, and
                // hold everything else until the restore is on its way.
                self.conn.update_value(|c| c.hold = true);
                let generation = self.generation();
                wasm_bindgen_futures::spawn_local(async move {
                    let read = wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await;
                    if self.generation() != generation {
                        return;
                    }
                    match read {
                        Ok(buf) => {
                            let bytes = js_sys::Uint8Array::new(&buf);
                            self.send_restore(
                                ResendableSource::File(name, file),
                                cluster,
                                Some(bytes),
                            );
                        }
                        Err(_) => {
                            self.conn.update_value(|c| {
                                c.hold = false;
                                c.restoring = None;
                            });
                            self.flush();
                            self.good.set_value(LastAccepted::default());
                            self.status.set(Status::Error(format!(
                                "{head}; restarted it, but could not read {name} again — \
                                 load a file or press Generate"
                            )));
                        }
                    }
                });
            }
        }
    }

    pub(in crate::ui) fn send_restore(
        self,
        kept: ResendableSource,
        cluster: Cluster,
        bytes: Option<js_sys::Uint8Array>,
    ) {
        let id = self.send(RequestKind::Restore, Some(kept), Some(cluster), None, bytes);
        self.conn.update_value(|c| {
            if let Some(r) = &mut c.restoring {
                r.id = id;
            }
        });
    }
}
