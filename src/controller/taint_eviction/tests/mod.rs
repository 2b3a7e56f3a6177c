mod autonomy;
mod behaviour;
mod harness;
mod integration;
mod scale;
mod upstream;
