//! Quay robot federation: `GET /oauth2/federation/robot/token` on the
//! registry host with Basic `org+robot:<ID token>` answers
//! `{"token": ...}`, a short-lived robot token used with the robot's name.
//!
//! Checked against the Red Hat Quay API reference ("Auth Federated Robot
//! Token", and `createOrgRobotFederation` for the trust side). The exchange
//! lives on the registry, so it uses the registry's scheme: plain HTTP only
//! where the registry itself is plain (loopback, `insecure`).

use super::http::{self, Ctx};
use super::{Login, Provider, need};
use crate::error::{Error, Result};
use crate::registry::Credentials;

/// The Quay login.
pub(crate) async fn login(login: &Login, ctx: &Ctx, jwt: &str) -> Result<Credentials> {
    let robot = need(
        &login.facts.username,
        "username",
        Provider::Quay,
        "the robot account, ORG+ROBOT",
    )?
    .to_string();
    if !robot.contains('+') {
        return Err(Error::input(
            format!("the quay login needs a robot account as `username`, not {robot:?}"),
            Some("a Quay robot is named ORG+ROBOT (e.g. acme+settings_push)".into()),
        ));
    }
    let url = http::join(&login.registry_base(), "/oauth2/federation/robot/token");
    let what = format!("Quay robot federation for {robot}");
    // A refusal that echoes the header shows base64(robot:ID token):
    // `Ctx::basic_auth` makes those forms secrets too.
    let rb = ctx.basic_auth(ctx.http().get(&url), &robot, jwt);
    let v = ctx
        .send_json(
            &what,
            &url,
            rb,
            format!(
                "add a federation entry to the robot {robot} (robot settings, \"Set robot federation\") with issuer https://token.actions.githubusercontent.com and subject repo:OWNER/REPO:ref:refs/heads/BRANCH; give the robot write on the repository"
            ),
        )
        .await?;
    let token = http::field(ctx, &v, "token", &what, &url, true)?;
    Ok(Credentials::new(robot, token))
}
