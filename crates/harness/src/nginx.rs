//! Running an nginx build: imports only [`crate::site`].
//!
//! * [`install`] finds the builds `scripts/provision-nginx` unpacked from Debian's packages;
//! * [`build`]: a [`Build`](build::Build) to run — a local process ([`local`], in a network namespace of
//!   its own: [`netns`]) or a Docker image ([`docker`]; running it as a container needs the `docker`
//!   feature) — started as an [`Instance`](instance::Instance);
//! * [`selection`] chooses the builds a run uses (provisioned or named; local or in images), for every
//!   driver and live test;
//! * [`log`] shortens nginx's error output for fault reports; [`single`] runs one nginx process in a scratch
//!   prefix, with no namespace (the key tests and the key-vector recorder);
//! * [`tree`] starts nginx and shims as process trees killed whole on every exit path; [`scratch`] makes the
//!   directories they use; both record their owner ([`owner`]) so that [`cleanup`] removes only what runs
//!   that are gone left behind.
//!
//! Inside the layer: `selection` → `build`, `install`, `docker`; `build` → `local`, `docker` → `instance`, `log`, `netns`, `tree`, `scratch` →
//! `owner`; `cleanup` → `tree`, `scratch`, `owner`.

pub mod build;
pub mod cleanup;
pub mod docker;
pub mod install;
pub mod instance;
pub mod local;
pub mod log;
pub mod netns;
pub mod owner;
pub mod scratch;
pub mod selection;
pub mod single;
pub mod tree;
