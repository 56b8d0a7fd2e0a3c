package main

import "syscall"

// sysProcAttr makes each child die with the launcher, so a crashed launcher (or test) leaves
// no replica behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
