//! The built-in admin endpoints (see the table in [`super`]).

use super::{
    config_edit, config_view, console, handler, models, pause, replay, rollout_post, rollouts, stats, Access,
    AdminApp,
};
use crate::reload::Trigger;
use crate::reply::Reply;
use http::Method;

/// Registers the built-in endpoints on `app`.
pub fn register(app: &mut AdminApp) {
    app.route(Method::GET, "/healthz", Access::Public, handler(|_| async { Reply::empty(200) }))
        .route(
            Method::GET,
            "/metrics",
            Access::Public,
            handler(|call| async move { super::metrics_page::reply(&call.state) }),
        )
        .route(
            Method::GET,
            "/admin/stats",
            Access::Token,
            handler(|call| async move { Reply::json_value(200, &stats::stats_json(&call.state)) }),
        )
        .route(
            Method::GET,
            "/admin/config",
            Access::Token,
            handler(|call| async move {
                let snap = call.state.snapshot.load_full();
                Reply::json_value(200, &config_view::document(&snap, &call.reloader))
            }),
        )
        .route(
            Method::POST,
            "/admin/reload",
            Access::Token,
            handler(|call| async move { call.reloader.reload_async(Trigger::Admin).await.into_reply() }),
        )
        .route(
            Method::GET,
            "/admin/models",
            Access::Token,
            handler(|call| async move { models::list(&call) }),
        )
        .route(Method::POST, "/admin/models/{}/load", Access::Token, handler(models::load))
        .route(Method::POST, "/admin/models/{}/unload", Access::Token, handler(models::unload))
        .route(Method::POST, "/admin/models/{}/pools/{}/pause", Access::Token, handler(pause::pause))
        .route(Method::POST, "/admin/models/{}/pools/{}/resume", Access::Token, handler(pause::resume))
        .route(Method::POST, "/admin/replay", Access::Token, handler(replay::replay))
        .route(Method::POST, "/admin/config/edit", Access::Token, handler(config_edit::edit))
        .route(
            Method::GET,
            "/admin/rollouts",
            Access::Token,
            handler(|call| async move { Reply::json_value(200, &rollouts::rollouts_json(&call.state)) }),
        )
        .route(Method::POST, "/admin/rollouts/{}/promote", Access::Token, handler(rollouts::promote))
        .route(Method::POST, "/admin/rollouts/{}/rollback", Access::Token, handler(rollouts::roll_back))
        .route(Method::POST, "/admin/rollouts/{}", Access::Token, handler(rollout_post::post))
        .route(Method::DELETE, "/admin/rollouts/{}", Access::Token, handler(rollout_post::withdraw));
    console::register(app);
}
