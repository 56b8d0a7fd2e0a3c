package redisserver

import "syscall"

// sysProcAttr makes every redis-server die with the process that started it, so a test
// binary or tool that crashes (or is killed) leaves no node behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
