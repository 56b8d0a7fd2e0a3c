//go:build !linux

package nginxtest

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
