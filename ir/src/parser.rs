//! TODO parser
