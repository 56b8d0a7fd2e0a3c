package nginxtest

import "syscall"

// procAttr has nginx's master sent SIGTERM if the test binary dies without its cleanups (a
// test timeout's panic, SIGKILL), on which the master stops its workers, then itself: started
// as a plain child, nginx outlived such a run, master and worker listening for good.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} }
