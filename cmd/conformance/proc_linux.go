package main

import "syscall"

// nginxProcAttr has nginx's master sent SIGTERM if this process dies (SIGKILLed, or the
// terminal it runs in closing: SIGHUP is Go's default death), on which the master stops its
// workers, then itself. Without it the gateway outlived a conformance run that died that way,
// master and worker listening for good on their ports, their directory left in the temp dir.
func nginxProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} }
