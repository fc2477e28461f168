//! The page's charts, as plain SVG. One small module per chart rather than a
//! chart crate: the charts are simple, and no maintained chart crate for
//! Leptos 0.8 stays this small in wasm.
//!
//! Each chart is a component that reads the page's [`Board`] through its
//! own memos, so an answer redraws only what it changed: a budget change
//! moves the curve's marker, CRAFT's series and bars, the load map and the
//! placement, and leaves the axes, BASE's and EPLB's series and the curve
//! as they are. Whatever a budget change redraws is one SVG path per series
//! or colour (attributes set on elements that stay), never an element per
//! bar, cell or box; details show in a line under a chart when the pointer
//! is over it, worked out only then.

pub mod cross;
mod curve;
mod grace;
mod heat;
mod layers;
mod placement;
mod replicas;
mod serving;
mod timeline;

pub use cross::CrossMatrix;
pub use curve::CurveChart;
pub use grace::{AffinityMap, GraceCurve};
pub use heat::HeatMap;
pub use layers::LayersChart;
pub use placement::PlacementChart;
pub use replicas::ReplicasChart;
pub use serving::ServingPanel;
pub use timeline::TimelineChart;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::board::Board;

const W: f64 = 640.0;
const H: f64 = 220.0;
const PAD_L: f64 = 44.0;
const PAD_R: f64 = 12.0;
const PAD_T: f64 = 12.0;
const PAD_B: f64 = 34.0;

/// Series colours by planner id: BASE, EPLB, CRAFT, Libra (colour-blind safe);
/// GRACE and any planner added to the registry later draw in the fallback
/// colour until given one here.
pub fn colour(name: &str) -> &'static str {
    match name {
        "base" => "#8c8c8c",
        "eplb" => "#e69f00",
        "craft" => "#0072b2",
        "libra" => "#cc79a7",
        _ => "#009e73",
    }
}

/// Display name of a plan: its planner's, from the core's registry (its
/// data-only entries: the main thread links no planner).
pub fn label(name: &str) -> &'static str {
    moeplan::planners::spec(name).map_or("plan", |p| p.display)
}

/// The display name of the planner the budget moves, from the registry
/// (the workspace's focus: CRAFT), for the titles drawn before any answer.
pub fn focus_title() -> &'static str {
    moeplan_view::focus_spec().map_or("plan", |p| p.display)
}

/// The balancers the page compares against BASE, from the registry: every
/// planner with options of its own but BASE (`EPLB, CRAFT, GRACE and
/// LIBRA`), for the page's tagline.
pub fn balancer_titles() -> String {
    let names: Vec<&str> = moeplan::planners::SPECS
        .iter()
        .filter(|p| !p.options.is_empty() && p.id.as_str() != "base")
        .map(|p| p.display)
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The expert-groups field's label, naming whom the setting is for: the
/// page's budgeted planners that take the shared `groups` option
/// (`EPLB expert groups`).
pub fn groups_title() -> &'static str {
    static TITLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TITLE.get_or_init(|| {
        let name = moeplan::planners::GROUPS.name;
        let who: Vec<&str> = page_planners()
            .filter(|p| p.budget().is_some() && p.options.iter().any(|o| o.name == name))
            .map(|p| p.display)
            .collect();
        format!("{} expert groups", who.join("/"))
    })
}

/// The registered planners the page's workspace can show (those that read
/// the loads: `moeplan::workspace`'s rule for a counts-only trace).
fn page_planners() -> impl Iterator<Item = &'static moeplan::planners::PlannerSpec> {
    moeplan::planners::SPECS
        .iter()
        .copied()
        .filter(|p| p.needs == moeplan::planners::Needs::Counts)
}

fn x_of(i: f64, n: f64) -> f64 {
    PAD_L + (W - PAD_L - PAD_R) * if n > 1.0 { i / (n - 1.0) } else { 0.5 }
}

fn y_of(v: f64, lo: f64, hi: f64) -> f64 {
    let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
    H - PAD_B - (H - PAD_T - PAD_B) * t.clamp(0.0, 1.0)
}

/// Appends `x` with `decimals` decimals (at most 3). SVG paths are long
/// strings of coordinates, and this is several times faster than `{:.1}`
/// (which goes through `core::fmt`).
///
/// ```
/// let mut s = String::new();
/// moeplan_app::charts::push_num(&mut s, -3.14159, 2);
/// s.push(' ');
/// moeplan_app::charts::push_num(&mut s, 0.96, 1);
/// s.push(' ');
/// moeplan_app::charts::push_num(&mut s, 12.0, 0);
/// assert_eq!(s, "-3.14 1.0 12");
/// ```
pub fn push_num(s: &mut String, x: f64, decimals: u32) {
    let decimals = decimals.min(3);
    let scale = 10u64.pow(decimals);
    let x = if x.is_finite() { x } else { 0.0 };
    let v = (x * scale as f64).round();
    if v < 0.0 {
        s.push('-');
    }
    let v = v.abs().min(1e15) as u64;
    push_uint(s, v / scale);
    if decimals > 0 {
        s.push('.');
        let frac = v % scale;
        let mut div = scale / 10;
        while div > 0 {
            s.push(char::from(b'0' + (frac / div % 10) as u8));
            div /= 10;
        }
    }
}

/// Appends a whole number.
pub fn push_uint(s: &mut String, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        s.push(char::from(d));
    }
}

/// One decimal, as a new string (for attributes).
fn num1(x: f64) -> String {
    let mut s = String::new();
    push_num(&mut s, x, 1);
    s
}

/// Appends a rectangle to a path (coordinates to 0.1).
fn push_rect(d: &mut String, x: f64, y: f64, w: f64, h: f64) {
    d.push('M');
    push_num(d, x, 1);
    d.push(' ');
    push_num(d, y, 1);
    d.push('h');
    push_num(d, w, 1);
    d.push('v');
    push_num(d, h, 1);
    d.push('h');
    push_num(d, -w, 1);
    d.push('z');
}

/// Polyline points.
fn points(pts: impl Iterator<Item = (f64, f64)>) -> String {
    let mut s = String::new();
    for (x, y) in pts {
        if !s.is_empty() {
            s.push(' ');
        }
        push_num(&mut s, x, 1);
        s.push(',');
        push_num(&mut s, y, 1);
    }
    s
}

/// Grid lines and tick labels for `lo..=hi`.
fn y_axis(lo: f64, hi: f64, ticks: usize) -> impl IntoView + use<> {
    (0..=ticks)
        .map(|i| {
            let v = lo + (hi - lo) * i as f64 / ticks as f64;
            let y = num1(y_of(v, lo, hi));
            view! {
                <line x1=format!("{PAD_L}") x2=format!("{}", W - PAD_R) y1=y.clone() y2=y.clone() class="grid"/>
                <text x=format!("{}", PAD_L - 4.0) y=num1(y_of(v, lo, hi) + 4.0) class="tick" text-anchor="end">{format!("{v:.2}")}</text>
            }
        })
        .collect_view()
}

/// Layer ids under a chart with one column per layer.
fn layer_ticks(ids: &[u32]) -> impl IntoView + use<> {
    let n = ids.len();
    let step = n.div_ceil(12).max(1);
    ids.iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0)
        .map(|(i, id)| {
            let x = x_of(i as f64, n as f64);
            view! { <text x=num1(x) y=format!("{}", H - 20.0) class="tick" text-anchor="middle">{id.to_string()}</text> }
        })
        .collect_view()
}

/// The layer ticks of the board's frame (redrawn only with a new frame).
fn frame_layer_ticks(board: Board) -> impl IntoView + use<> {
    move || {
        board
            .frame
            .with(|f| f.as_ref().map(|f| layer_ticks(&f.layer_ids)))
    }
}

/// Where the pointer is, in the chart's own coordinates (`w` × `h`, the
/// SVG's viewBox, centred and scaled to fit as SVG does by default).
fn pointer(ev: &web_sys::MouseEvent, w: f64, h: f64) -> Option<(f64, f64)> {
    let svg: web_sys::Element = ev.current_target()?.dyn_into().ok()?;
    let r = svg.get_bounding_client_rect();
    let scale = (r.width() / w).min(r.height() / h);
    if scale.is_nan() || scale <= 0.0 {
        return None;
    }
    let x = (f64::from(ev.client_x()) - r.left() - (r.width() - w * scale) / 2.0) / scale;
    let y = (f64::from(ev.client_y()) - r.top() - (r.height() - h * scale) / 2.0) / scale;
    Some((x, y))
}

/// The column under `x` of `n` equal columns across the plot.
fn column(x: f64, n: usize) -> Option<usize> {
    let t = (x - PAD_L) / (W - PAD_L - PAD_R);
    (n > 0 && (0.0..1.0).contains(&t)).then(|| ((t * n as f64) as usize).min(n - 1))
}

/// The nearest of `n` points spread across the plot (as [`x_of`] places
/// them) to `x`.
fn nearest(x: f64, n: usize) -> Option<usize> {
    if n == 0 || !(PAD_L - 8.0..=W - PAD_R + 8.0).contains(&x) {
        return None;
    }
    if n == 1 {
        return Some(0);
    }
    let t = (x - PAD_L) / (W - PAD_L - PAD_R) * (n - 1) as f64;
    Some((t.round().max(0.0) as usize).min(n - 1))
}

/// The pointer over a chart, and the line under it that says what is there.
#[derive(Clone, Copy)]
struct Hover(RwSignal<Option<(f64, f64)>>);

impl Hover {
    fn new() -> Self {
        Hover(RwSignal::new(None))
    }

    fn track(self, ev: &web_sys::MouseEvent) {
        self.0.set(pointer(ev, W, H));
    }

    fn leave(self) {
        self.0.set(None);
    }

    /// The readout line: `text` of the pointer's place, or `hint`.
    fn readout(
        self,
        hint: &'static str,
        text: impl Fn(f64, f64) -> Option<String> + Send + Sync + 'static,
    ) -> impl IntoView {
        view! {
            <p class="readout">
                {move || self.0.get().and_then(|(x, y)| text(x, y)).unwrap_or_else(|| hint.to_string())}
            </p>
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_format_like_std() {
        for &x in &[
            0.0,
            0.04,
            0.05,
            1.25,
            -0.04,
            -7.96,
            123.456,
            99.95,
            1e6 + 0.3,
        ] {
            for d in 0..=3u32 {
                let mut s = String::new();
                push_num(&mut s, x, d);
                let want = format!("{:.*}", d as usize, x);
                // std rounds half to even on exact ties; these have none,
                // but "-0.0" is "0.0" here.
                let want = if want
                    .trim_start_matches('-')
                    .trim_matches(['0', '.'])
                    .is_empty()
                {
                    want.trim_start_matches('-').to_string()
                } else {
                    want
                };
                let got: f64 = s.parse().unwrap();
                assert!(
                    (got - x).abs() <= 0.5 * 10f64.powi(-(d as i32)) + 1e-9,
                    "{x} {d}: {s}"
                );
                assert_eq!(s.len(), want.len(), "{x} {d}: {s} vs {want}");
            }
        }
        let mut s = String::new();
        push_num(&mut s, f64::NAN, 1);
        assert_eq!(s, "0.0");
    }

    #[test]
    fn columns_and_points_under_the_pointer() {
        assert_eq!(column(PAD_L, 10), Some(0));
        assert_eq!(column(W - PAD_R - 0.01, 10), Some(9));
        assert_eq!(column(PAD_L - 1.0, 10), None);
        assert_eq!(column(W, 10), None);
        assert_eq!(column(PAD_L + 1.0, 0), None);
        assert_eq!(nearest(x_of(3.0, 7.0) + 2.0, 7), Some(3));
        assert_eq!(nearest(PAD_L - 4.0, 7), Some(0));
        assert_eq!(nearest(0.0, 7), None);
    }
}
