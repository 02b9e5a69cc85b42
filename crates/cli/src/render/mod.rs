//! How the commands write their answers: [`svg`], the pictures of `--svg`.

pub(crate) mod svg;
