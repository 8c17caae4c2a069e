package console

import (
	"context"
	"net/http"
	"time"

	"github.com/batonproxy/baton/mesh"
)

// consoleMeshView is the mesh page's data.
type consoleMeshView struct {
	Graph    mesh.Graph
	Batons   []mesh.Announcement
	StoreErr bool
	Expiry   time.Duration
	Self     string // this agent
}

// consoleMesh draws the Batons that share this Baton's store
// (mesh.List): the agents as a graph, and a table of the Batons.
func (con *Console) consoleMesh(w http.ResponseWriter, r *http.Request) {
	v := consoleMeshView{Expiry: mesh.Expiry, Self: con.o.Config.Agent}
	status := http.StatusOK
	if con.o.Mesh != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		batons, err := mesh.List(ctx, con.o.Mesh)
		if err != nil {
			con.o.Log.Warn("console: reading the mesh", "error", err.Error())
			v.StoreErr, status = true, http.StatusServiceUnavailable
		}
		v.Batons, v.Graph = batons, mesh.Layout(batons)
	}
	con.consoleRender(w, r, status, "mesh.html", "mesh", v)
}
