// One binary for the whole control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) and kubectl, chosen by the name it is started under, as hyperkube once was. The separate
// binaries under cmd/ hold the same code; this one exists because the libraries they share are
// linked once, so it travels to a machine that takes few megabytes (the GPU machine, issue 21).
// Built on demand by tests/cluster/build.sh --all-in-one; not part of a normal build.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	commands := map[string]func() *cobra.Command{
		"kube-apiserver":          apiserver.NewAPIServerCommand,
		"kube-controller-manager": controllermanager.NewControllerManagerCommand,
		"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	}
	name := filepath.Base(os.Args[0])
	if name == "etcd" {
		etcdmain.Main(os.Args)
		return
	}
	if name == "kubectl" { // as cmd/kubectl
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	command, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "started as %q: link this binary as etcd, kube-apiserver, kube-controller-manager, kube-scheduler or kubectl\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(command()))
}
