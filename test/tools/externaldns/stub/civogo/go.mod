module github.com/civo/civogo

go 1.26.0
