mod autonomy;
mod beyond_upstream;
mod harness;
mod scale;
mod time_added;
mod upstream;
mod upstream_integration;
