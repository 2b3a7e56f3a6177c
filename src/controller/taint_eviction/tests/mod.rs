mod autonomy;
mod beyond_upstream;
mod harness;
mod scale;
mod upstream;
mod upstream_integration;
