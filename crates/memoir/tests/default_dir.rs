//! `Session::default_dir` and the environment. Alone in its own test binary
//! (one test, one process) because it sets environment variables, which is
//! unsound while other threads may read the environment.

use std::path::PathBuf;

use memoir::transcript::Session;
use memoir::Error;

#[test]
fn default_dir_honours_env_and_rejects_empty() {
    std::env::set_var("MEMOIR_SESSION_DIR", "/x/sessions");
    assert_eq!(
        Session::default_dir().unwrap(),
        PathBuf::from("/x/sessions")
    );
    std::env::set_var("MEMOIR_SESSION_DIR", "");
    assert!(matches!(Session::default_dir(), Err(Error::Config(_))));
    std::env::remove_var("MEMOIR_SESSION_DIR");
    std::env::set_var("MEMOIR_HOME", "/y/home");
    assert_eq!(
        Session::default_dir().unwrap(),
        PathBuf::from("/y/home/sessions")
    );
    std::env::set_var("MEMOIR_HOME", "");
    assert!(Session::default_dir().is_err());
    std::env::remove_var("MEMOIR_HOME");
    let home = std::env::var("HOME").unwrap();
    assert_eq!(
        Session::default_dir().unwrap(),
        PathBuf::from(home).join(".memoir/sessions")
    );
}
