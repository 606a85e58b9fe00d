//! Renderings of a report: the human summary, the HTML page, Graphviz, Prometheus metrics, and
//! the refreshing live view (which also reads the running pipeline for rates).

pub mod dot;
pub mod html;
pub mod html_tables;
pub mod human;
pub mod live_view;
pub mod load_balancing;
pub mod messages;
pub mod metrics;
pub mod page;
pub mod select;
pub mod text;
