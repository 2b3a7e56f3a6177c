//! Where we deliberately do better than upstream (SPEC §14), and the state dump.
