//! The cluster side: what a cluster repository needs to follow settings
//! images ([`flux`]), and proof that what it runs is what git holds
//! ([`verify`], over every reference a cluster repository holds: [`scan`]).

pub mod finding;
pub mod flux;
pub mod mentions;
pub mod scan;
pub mod verify;
