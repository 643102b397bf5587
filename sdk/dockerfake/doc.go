// Package dockerfake is an in-memory fake Docker engine for plugin authors'
// unit tests: it answers the Engine API calls sdk/container makes, on a
// unix socket of the test's own, so a hook under test can create, inspect,
// replace and remove containers without touching a real engine — and
// without replacing the containers of the author's running lab that have
// the same names.
//
// Start serves it; Host is the endpoint to give the hook as
// sdk.Env.DockerHost. A test arranges the engine (AddImage, FailPull,
// AddNetwork), runs the hook, then reads what the hook left (Containers,
// Container, Networks, Volumes, Requests) or changes it behind the hook's
// back (Exit for a crash, Stop for `docker stop`):
//
//	func TestPostUp(t *testing.T) {
//		eng := dockerfake.Start(t, dockerfake.WithImages("quay.io/acme/cache:v1"))
//		h := plugintest.New(t, acme.Plugin{}) // it declares sdk.CapDocker
//		docker := plugintest.WithEnv(func(e *sdk.Env) { e.DockerHost = eng.Host() })
//
//		if _, err := h.Run(sdk.PostUp, docker); err != nil {
//			t.Fatal(err)
//		}
//		c, ok := eng.Container("acme-cache")
//		if !ok || !c.Running() || c.Networks["kind"].IP != "172.30.255.60" {
//			t.Fatalf("acme-cache: %+v", c)
//		}
//		if got := string(c.Files["/etc/acme/config.yml"].Content); got != "zone: demo.internal\n" {
//			t.Fatalf("config.yml = %q", got)
//		}
//
//		// Stopped behind the plugin's back: the next PostUp starts it again.
//		eng.Stop("acme-cache")
//		if _, err := h.Run(sdk.PostUp, docker); err != nil {
//			t.Fatal(err)
//		}
//		if again, _ := eng.Container("acme-cache"); !again.Running() || again.ID != c.ID {
//			t.Fatalf("after a second PostUp: %+v", again)
//		}
//	}
//
// The engine starts with the networks every Docker engine has (bridge,
// host, none) and the lab's bridge, LabNetwork (LabSubnet), as
// plugintest.DefaultEnv describes it; no image, container or volume. It
// reports API version DefaultAPIVersion (that of the engine in marina's VM)
// unless WithAPIVersion says otherwise, and negotiates like the real one.
//
// It behaves as Docker 20.10 does where sdk/container can tell — status
// codes and JSON error bodies ({"message": ...}: 404 for a missing
// container, image, network or volume, 409 for a name in use or a running
// container removed without force or a volume in use, 304 for starting a
// running container), container states (created, running, exited) and
// restart policies, label filters, static and dynamic addresses on
// networks, published host ports that conflict, named volumes, and files
// copied in with the archive API (kept, and readable back). Where Docker
// versions differ it gives the stricter answer: creating a network whose
// name is taken is refused (409, as from Docker 25), and a container on a
// missing network fails at create rather than at start. A conformance test
// runs one scenario against this fake and against a real engine and
// compares what sdk/container observes.
//
// What it does not do: no process runs (a container is "running" until the
// test calls Exit or Stop; nothing listens on its address or ports, and
// health checks, logs, exec, attach, wait, stats and events do not exist),
// no real networking (addresses are allocated, never reachable; no DNS), no
// image content (pulls are instant; an image has no config, layers or
// files, so only files copied into a container can be read back, and any
// destination directory of a copy is taken to exist), no bind-mount source
// check, and no registry authentication. Endpoints it does not serve answer
// 501 Not Implemented with a message naming the call and what is covered;
// test those calls against a real engine with sdk/dockertest.
package dockerfake
