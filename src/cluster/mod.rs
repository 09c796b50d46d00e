//! The cluster side: what a cluster repository needs to follow settings
//! images ([`flux`]), and proof that what it runs is what git holds
//! ([`verify`], over every reference in what the cluster applies: [`scan`]).

pub mod finding;
pub mod flux;
pub mod mentions;
pub mod report;
pub mod scan;
pub mod spelling;
pub mod stream;
pub mod verify;
