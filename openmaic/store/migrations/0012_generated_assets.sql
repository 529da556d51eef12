-- Generated media (pictures, videos and their posters, narration clips) live in the assets table beside the
-- materials' images, so a backup of the database is a backup of every course with its media.
--
-- A generated asset's id is derived from its owner and the sha256 of its bytes (content-addressed and
-- owner-scoped: the same clip stored twice by one owner is one row; two owners never share a row, so an id
-- says nothing about another owner's files). `kind` says what the bytes are for; `course_id` which course
-- they were made for (null for a material's image). Nothing about the provider that made them is kept.
ALTER TABLE assets
    ADD COLUMN kind text NOT NULL DEFAULT 'material'
        CHECK (kind IN ('material', 'image', 'video', 'poster', 'narration')),
    ADD COLUMN course_id text;

-- Served in byte ranges (audio and video seek): uncompressed out-of-line storage lets substring() read only
-- the chunks a range needs. Media is compressed already, so nothing is lost.
ALTER TABLE assets ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE INDEX assets_course ON assets (course_id) WHERE course_id IS NOT NULL;
