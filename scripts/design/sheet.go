package design

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"

	"github.com/temperml/temper/algorithms/layoutrender"
	"github.com/temperml/temper/algorithms/verify"
)

// Sheet draws rows of layout completions as one PNG, each completion a cell×cell picture of the
// 100×100 canvas framed by a 2-pixel grey gutter: for a note's start-against-end picture, one row
// per evaluation, the same held-out briefs in each column. A completion the renderer refuses is a
// pink cell. The same rows give the same bytes.
func Sheet(rows [][]string, cell int) ([]byte, error) {
	const gutter = 2
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	if cols == 0 || cell <= 0 {
		return nil, fmt.Errorf("design: sheet: %d rows of at most %d completions at %d pixels: nothing to draw", len(rows), cols, cell)
	}
	out := image.NewRGBA(image.Rect(0, 0, gutter+cols*(cell+gutter), gutter+len(rows)*(cell+gutter)))
	draw.Draw(out, out.Bounds(), image.NewUniform(color.RGBA{160, 160, 160, 255}), image.Point{}, draw.Src)
	opts := layoutrender.Options{Canvas: verify.Size{W: Canvas, H: Canvas}, Width: cell, Height: cell}
	for i, r := range rows {
		for j, c := range r {
			at := image.Pt(gutter+j*(cell+gutter), gutter+i*(cell+gutter))
			rect := image.Rectangle{Min: at, Max: at.Add(image.Pt(cell, cell))}
			res, err := layoutrender.Render(c, opts)
			if err != nil {
				draw.Draw(out, rect, image.NewUniform(color.RGBA{255, 200, 210, 255}), image.Point{}, draw.Src)
				continue
			}
			draw.Draw(out, rect, res.Image, image.Point{}, draw.Src)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, out); err != nil {
		return nil, fmt.Errorf("design: sheet: encode png: %w", err)
	}
	return buf.Bytes(), nil
}
