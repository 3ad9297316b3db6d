package main

import (
	"fmt"

	"github.com/godbus/dbus/v5"
)

// The first running app owns this name on the session bus; a second launch
// finds it taken, asks the first to show its window, and exits before it
// opens the database or starts loading a model.
const (
	instanceName      = "app.suzuran.Suzuran.Instance"
	instancePath      = "/app/suzuran/Suzuran/Instance"
	instanceInterface = "app.suzuran.Suzuran.Instance"
)

// claimInstance makes this process the running app. When another one
// already is, it asks that one to show its window and returns
// first == false. show is called (from D-Bus' goroutine) when a later
// launch asks this one. release gives the name back.
func claimInstance(show func()) (first bool, release func(), err error) {
	conn, err := dbus.SessionBusPrivate()
	if err != nil {
		return true, func() {}, fmt.Errorf("session bus: %w", err)
	}
	err = conn.Auth(nil)
	if err == nil {
		err = conn.Hello()
	}
	if err != nil {
		conn.Close()
		return true, func() {}, fmt.Errorf("session bus: %w", err)
	}
	if err := conn.ExportMethodTable(map[string]any{
		"Show": func() *dbus.Error { show(); return nil },
	}, instancePath, instanceInterface); err != nil {
		conn.Close()
		return true, func() {}, err
	}
	reply, err := conn.RequestName(instanceName, dbus.NameFlagDoNotQueue)
	if err != nil {
		conn.Close()
		return true, func() {}, fmt.Errorf("claiming %s: %w", instanceName, err)
	}
	if reply == dbus.RequestNameReplyPrimaryOwner {
		return true, func() { conn.Close() }, nil
	}
	defer conn.Close()
	if err := conn.Object(instanceName, instancePath).Call(instanceInterface+".Show", 0).Err; err != nil {
		return false, func() {}, fmt.Errorf("asking the running Suzuran to show its window: %w", err)
	}
	return false, func() {}, nil
}
