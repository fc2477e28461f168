//! The planner page's entry point: mounts the Leptos app.

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(moeplan_app::ui::App);
}
