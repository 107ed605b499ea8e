"""`DIR/index.html`: every picture of a file in pipeline order, each beside its IR text.

One page, no scripts, no external files: a contents list, then per kernel one section
per stage (number, pass name, what it does, the picture, the IR after it), stages
whose pass did not run listed as such, then the tile decomposition and the bank map.
With `ext == "dot"` (Graphviz not installed) the pictures are links to their sources.
"""

from __future__ import annotations

from html import escape

from . import style

CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 24px 32px; color: #222;
       background: #f4f5f7; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 8px; border-bottom: 2px solid #ccc; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 0 0 4px; }
p { margin: 4px 0; }
.lead { color: #555; }
nav { background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 8px 16px;
      margin: 12px 0; }
nav ol { margin: 4px 0; padding-left: 20px; columns: 2; }
nav .skipped, nav .skipped a { color: #999; }
.stage { background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 12px 16px;
         margin: 14px 0; }
.stage.skipped { background: #fafafa; color: #777; padding: 8px 16px; }
.pass { color: #555; font-size: 14px; }
.row { display: flex; gap: 16px; align-items: flex-start; margin-top: 8px; }
.pic { flex: 0 0 58%; max-height: 1100px; overflow: auto; border: 1px solid #eee; }
.pic img { width: 100%; display: block; }
.wide .pic { flex: 1 1 100%; max-height: none; }
pre { flex: 1 1 0; min-width: 0; margin: 0; max-height: 1100px; overflow: auto;
      white-space: pre-wrap; font-size: 11px; line-height: 1.35; background: #f6f8fa;
      border: 1px solid #e1e4e8; border-radius: 6px; padding: 8px 10px; }
.key { display: inline-block; width: 12px; height: 12px; border: 3px solid; border-radius: 3px;
       vertical-align: middle; margin: 0 4px 0 12px; }
.nodot { background: #fff3cd; border: 1px solid #e0c36c; border-radius: 6px; padding: 8px 12px; }
"""


def index_html(file: str, kernels, ext: str) -> str:
    """The page for `kernels` (viz.KernelPictures) whose pictures are `<kernel>/<stem>.<ext>`."""
    names = ", ".join(k.name for k in kernels)
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>tiledsl viz · {escape(file)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>tiledsl viz · {escape(file)}</h1>",
        f'<p class="lead">kernel(s) {escape(names)}: the IR after lowering and after every '
        "pass, in pipeline order, each beside its IR text; then the tile decomposition and "
        "the shared-memory banks. Marked against the stage before:"
        + "".join(
            f'<span class="key" style="border-color:{colour}"></span>{escape(text)}'
            for colour, text in style.DIFF_LEGEND.values()
        )
        + "</p>",
    ]
    if ext == "dot":
        out.append(
            '<p class="nodot">Graphviz\'s <code>dot</code> was not found, so the pictures are '
            "links to their <code>.dot</code> sources. Install it (Debian/Ubuntu: "
            "<code>apt-get install graphviz</code>) and run <code>tiledsl viz</code> again, "
            "or render one with <code>dot -Tsvg FILE.dot -o FILE.svg</code>.</p>"
        )
    out.append(_contents(kernels))
    for k in kernels:
        out.append(f'<h2 id="{_id(k.name)}">kernel {escape(k.name)}</h2>')
        for stage in k.stages:
            out.append(_stage(k.name, stage, ext))
        out.append(
            _wide(
                k.name,
                k.tiles,
                ext,
                "the grid's visiting order (a sample grid), one block's warps and their "
                "fragments, and what each shared-memory slot holds along K (traced from the IR)",
            )
        )
        out.append(
            _wide(
                k.name,
                k.banks,
                ext,
                "the bank of every word of one fragment load from each A and B tile, at the "
                "natural pitch and at the kernel's; red: conflicts (the model of tiledsl check)",
            )
        )
        if k.roles is not None:
            out.append(
                _wide(
                    k.name,
                    k.roles,
                    ext,
                    "the producer's and the consumers' statements at each K step, and which "
                    "copy or release completes the mbarrier phase each wait needs",
                )
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _contents(kernels) -> str:
    out = ["<nav><b>contents</b>"]
    for k in kernels:
        out.append(f'<p><a href="#{_id(k.name)}">kernel {escape(k.name)}</a></p><ol start="0">')
        for s in k.stages:
            note = "" if s.ran else " (did not run)"
            cls = "" if s.ran else ' class="skipped"'
            anchor = _id(k.name, f"{s.number:02d}")
            out.append(f'<li{cls}><a href="#{anchor}">{escape(s.name)}</a>{note}</li>')
        out.append(f'<li><a href="#{_id(k.name, "tiles")}">tile decomposition</a></li>')
        out.append(f'<li><a href="#{_id(k.name, "banks")}">shared-memory banks</a></li>')
        if k.roles is not None:
            out.append(f'<li><a href="#{_id(k.name, "roles")}">warp roles and handoffs</a></li>')
        out.append("</ol>")
    out.append("</nav>")
    return "\n".join(out)


def _stage(kernel: str, stage, ext: str) -> str:
    anchor = _id(kernel, f"{stage.number:02d}")
    heading = f"{stage.number:02d} · {escape(stage.name)}"
    asked = (
        f"directive <code>{escape(stage.directive)}</code>" if stage.directive else "always runs"
    )
    what = f"{escape(stage.summary)} ({asked})"
    if stage.picture is None:
        return (
            f'<section class="stage skipped" id="{anchor}"><h3>{heading} — did not run</h3>'
            f'<p class="pass">{what}: not asked for by this schedule, so the IR is the same as '
            "after the stage before; no picture.</p></section>"
        )
    return (
        f'<section class="stage" id="{anchor}"><h3>{heading}</h3><p class="pass">{what}</p>'
        f'<div class="row">{_picture(kernel, stage.picture, ext)}'
        f"<pre>{escape(stage.ir_text)}</pre></div></section>"
    )


def _wide(kernel: str, picture, ext: str, what: str) -> str:
    return (
        f'<section class="stage wide" id="{_id(kernel, picture.stem)}">'
        f'<h3>{escape(picture.title)}</h3><p class="pass">{escape(what)}</p>'
        f'<div class="row">{_picture(kernel, picture, ext)}</div></section>'
    )


def _picture(kernel: str, picture, ext: str) -> str:
    href = f"{escape(kernel)}/{escape(picture.stem)}.{ext}"
    if ext == "dot":
        return f'<div class="pic nodot">not rendered: <a href="{href}">{href}</a></div>'
    alt = f"{kernel}: {picture.title}"
    return (
        f'<div class="pic"><a href="{href}"><img src="{href}" alt="{escape(alt)}" '
        'loading="lazy"></a></div>'
    )


def _id(*parts: str) -> str:
    return "-".join(escape(p) for p in parts)
