//! `kubectl herd dashboard` in a real headless browser (Debian's `chromium` driven through
//! `chromedriver` over WebDriver): the dashboard is started in-process with the test's
//! kubeconfig, as the command starts it. Screenshots of the main pages go to
//! `target/tmp/dashboard-screenshots` for a reviewer.

mod browser;
mod live;
mod pages;

use herd_e2e::E2eTest;

/// Every test of this module.
pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "dashboard::pages_need_the_token_and_show_refusals_as_the_api_server_said",
            pages::pages_need_the_token_and_show_refusals_as_the_api_server_said,
        ),
        E2eTest::shared(
            "dashboard::a_fan_out_s_tree_grows_live",
            live::a_fan_out_s_tree_grows_live,
        )
        .on_node(),
        E2eTest::shared(
            "dashboard::the_form_answers_and_the_button_cancels",
            live::the_form_answers_and_the_button_cancels,
        )
        .on_node(),
    ]
}
